// libFuzzer target: chat-template parsing and rendering on arbitrary template text.
// Whatever the input, parse() either throws pypto::Error or yields a template whose render()
// returns or throws pypto::Error: no crash, no hang, no sanitizer report.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace {

// A fixed context with every kind of value templates read.
const nlohmann::ordered_json& context() {
  static const auto ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You are helpful."},
      {"role": "user", "content": "Hi 😀 \"q\" \\ <think>x</think>"},
      {"role": "assistant", "content": "", "reasoning_content": "r",
       "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"a": [1, 2.5, null]}}},
                      {"function": {"name": "g", "arguments": "{\"b\": true}"}}]},
      {"role": "tool", "content": "result"},
      {"role": "user", "content": [{"type": "text", "text": "part"}]}],
    "tools": [{"type": "function", "function": {"name": "f", "description": "d",
      "parameters": {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "number"}}},
      "required": ["a"]}}}],
    "add_generation_prompt": true, "enable_thinking": false, "bos_token": "<s>", "eos_token": "</s>"})");
  return ctx;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 1 << 16) return 0;  // templates are small; longer inputs only slow the search down
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto t = pypto::ChatTemplate::parse(text);
    (void)t->render(context());
  } catch (const pypto::Error&) {
  }
  return 0;
}
