#pragma once
// The Qwen3.5 / Qwen3.6 chat template (src/model/chat_templates/Qwen3.6.jinja, embedded), for
// checkpoints written without one: make-test-model's hybrid presets. It is a copy of the
// published template taken from two public copies that agree byte for byte, not from Qwen's own
// tokenizer_config.json (not obtainable here; docs/status.md). It thinks by default (the
// generation prompt ends inside "<think>\n"), takes enable_thinking and preserve_thinking, and
// writes tool calls in the XML form (serve/xml_tool_parser.h). The parity test renders the same
// file against @huggingface/jinja.
#include <string>

namespace pypto {

const std::string& qwen35_chat_template();

}  // namespace pypto
