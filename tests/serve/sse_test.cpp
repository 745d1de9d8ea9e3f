// SSE framing: events out, and reassembly from arbitrary byte pieces.
#include <gtest/gtest.h>

#include "serve/sse.h"

namespace pypto {
namespace {

TEST(Sse, EventIsOneDataLine) {
  nlohmann::ordered_json j = {{"text", "a\nb"}, {"n", 1}};
  EXPECT_EQ(sse_event(j), "data: {\"text\":\"a\\nb\",\"n\":1}\n\n");
  EXPECT_EQ(kSseDone, "data: [DONE]\n\n");
}

TEST(Sse, ParserReassemblesAcrossPieces) {
  const std::string stream = sse_event({{"a", 1}}) + ": keep-alive\n\n" + sse_event({{"b", "x"}}) + std::string(kSseDone);
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseParser p;
    std::vector<std::string> all = p.feed(stream.substr(0, cut));
    for (std::string& e : p.feed(stream.substr(cut))) all.push_back(e);
    ASSERT_EQ(all.size(), 3u) << cut;
    EXPECT_EQ(all[0], "{\"a\":1}");
    EXPECT_EQ(all[1], "{\"b\":\"x\"}");
    EXPECT_EQ(all[2], "[DONE]");
  }
}

}  // namespace
}  // namespace pypto
