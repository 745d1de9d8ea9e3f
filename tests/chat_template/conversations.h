#pragma once
// Project-built render contexts for the chat-template parity test: conversations (multi-turn,
// with and without system, tools, tool calls and responses, reasoning, text parts, unicode and
// escapes) crossed with the flags templates branch on (add_generation_prompt, enable_thinking).
#include <vector>

#include <nlohmann/json.hpp>

namespace pypto::test {

// Deterministic: the same list on every run.
std::vector<nlohmann::ordered_json> chat_template_contexts();

}  // namespace pypto::test
