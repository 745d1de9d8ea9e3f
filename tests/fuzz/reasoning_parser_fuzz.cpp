// libFuzzer target: the Qwen3 reasoning split on arbitrary output (and the prompt-tail check on
// the same text). Fed once whole and once in pieces, the parser must give the same reasoning
// and content (a tag split across deltas changes nothing). No crash, no hang, no sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "serve/reasoning_parser.h"

namespace {

pypto::ReasoningParser::Delta run(std::string_view text, pypto::ReasoningStart start, const std::vector<size_t>& cuts) {
  pypto::ReasoningParser p(start);
  pypto::ReasoningParser::Delta all;
  auto take = [&](const pypto::ReasoningParser::Delta& d) {
    all.reasoning += d.reasoning;
    all.content += d.content;
  };
  size_t at = 0;
  for (size_t cut : cuts) {
    take(p.append(text.substr(at, cut - at)));
    at = cut;
  }
  take(p.append(text.substr(at)));
  take(p.flush());
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2 || size > 1 << 14) return 0;
  const pypto::ReasoningStart start = data[0] % 3 == 0   ? pypto::ReasoningStart::Detect
                                      : data[0] % 3 == 1 ? pypto::ReasoningStart::InReasoning
                                                         : pypto::ReasoningStart::ContentOnly;
  const size_t stride = 1 + data[1] % 16;
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  (void)pypto::reasoning_start_from_prompt(text);
  std::vector<size_t> cuts;
  for (size_t i = stride; i < text.size(); i += stride + uint8_t(text[i]) % 7) cuts.push_back(i);
  const auto whole = run(text, start, {});
  const auto pieces = run(text, start, cuts);
  if (whole.reasoning != pieces.reasoning || whole.content != pieces.content) __builtin_trap();
  if (start == pypto::ReasoningStart::ContentOnly && (!whole.reasoning.empty() || whole.content != text))
    __builtin_trap();  // no reasoning parsing at all: the text is content as it is
  return 0;
}
