// /metrics for speculative decoding: vLLM's counter names with the engine's counts, a series per
// draft position up to k, and nothing at all when no engine speculates.
#include <gtest/gtest.h>

#include "serve/metrics.h"

namespace pypto {
namespace {

double sample(const std::string& text, const std::string& name, const std::string& extra_label = "") {
  const std::string key = name + "{model_name=\"m\",engine=\"0\"" + extra_label + "} ";
  const size_t at = text.find("\n" + key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + 1 + key.size()));
}

TEST(SpecDecodeMetrics, VllmCountersFromTheEngine) {
  ServerMetrics m(1, 256);
  std::vector<EngineGauges> gauges(1);
  EXPECT_EQ(m.render("m", gauges).find("spec_decode"), std::string::npos);

  gauges[0].speculative = true;
  gauges[0].num_speculative_tokens = 3;
  gauges[0].spec_decode.observe(3, 2);
  gauges[0].spec_decode.observe(3, 0);
  gauges[0].spec_decode.observe(2, 1);
  const std::string text = m.render("m", gauges);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_drafts_total"), 3);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_draft_tokens_total"), 8);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_accepted_tokens_total"), 3);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total", ",position=\"0\""), 2);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total", ",position=\"1\""), 1);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total", ",position=\"2\""), 0);
  EXPECT_NE(text.find("# TYPE vllm:spec_decode_num_drafts_total counter\n"), std::string::npos);
}

}  // namespace
}  // namespace pypto
