// libFuzzer target: the Qwen3 tool-call parser on arbitrary model output. The text is fed once
// whole and once in pieces (cut where the input says); both must give the same content and the
// same calls (the parser's contract: a tag split across deltas changes nothing), and each call's
// streamed argument pieces must add up to its arguments. No crash, no hang, no sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "serve/tool_parser.h"

namespace {

struct Result {
  std::string content;
  std::string calls;  // name(arguments) of each call
};

Result run(std::string_view text, int32_t max_calls, const std::vector<size_t>& cuts) {
  int next_id = 0;
  pypto::ToolCallParser p([&] { return "call_" + std::to_string(next_id++); }, max_calls);
  Result r;
  std::vector<std::string> streamed;
  auto take = [&](const pypto::ToolCallParser::Delta& d) {
    r.content += d.content;
    for (const auto& c : d.calls) {
      if (c.index < 0 || size_t(c.index) > streamed.size()) __builtin_trap();  // dense, in order
      if (size_t(c.index) == streamed.size()) {
        if (!c.opens) __builtin_trap();  // a call's first piece opens it
        streamed.emplace_back();
      }
      streamed[size_t(c.index)] += c.arguments;
    }
  };
  size_t at = 0;
  for (size_t cut : cuts) {
    take(p.append(text.substr(at, cut - at)));
    at = cut;
  }
  take(p.append(text.substr(at)));
  take(p.flush());
  if (streamed.size() != p.calls().size()) __builtin_trap();
  for (size_t i = 0; i < streamed.size(); ++i) {
    if (streamed[i] != p.calls()[i].arguments) __builtin_trap();
    r.calls += p.calls()[i].name + "(" + p.calls()[i].arguments + ")";
  }
  if (max_calls >= 0 && int32_t(p.calls().size()) > max_calls) __builtin_trap();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 1 << 14) return 0;
  const int32_t max_calls = int32_t(data[0] % 4) - 1;  // -1 (no limit) .. 2
  const size_t stride = 1 + data[1] % 16;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  std::vector<size_t> cuts;
  for (size_t i = stride; i < text.size(); i += stride + uint8_t(text[i]) % 7) cuts.push_back(i);
  const Result whole = run(text, max_calls, {});
  const Result pieces = run(text, max_calls, cuts);
  if (whole.content != pieces.content || whole.calls != pieces.calls) __builtin_trap();
  return 0;
}
