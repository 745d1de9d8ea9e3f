#pragma once
// Limits on the sizes of request fields whose cost grows with their size on every engine step
// or on the request thread (docs/api.md, "Input limits"). Each is far above what a real client
// sends; a request past one gets a 400 naming the field, the limit and the value found.
#include <cstdint>

namespace pypto {

// `stop`: strings checked against every generated token's text (OpenAI allows 4).
inline constexpr int32_t kMaxStopStrings = 64;
inline constexpr int32_t kMaxStopStringBytes = 1024;
// `logit_bias`: entries applied to every sampled row.
inline constexpr int32_t kMaxLogitBiasEntries = 2048;
// `tools`: functions declared in one chat request (OpenAI's limit), each rendered into the prompt
// and compiled into the tool-call grammar.
inline constexpr int32_t kMaxTools = 128;
// `structured_outputs.choice`: alternatives.
inline constexpr int32_t kMaxChoices = 4096;
// n × max_tokens summed over the prompts of one request: the tokens it may make the engine
// generate (n is at most kMaxN = 128 and max_tokens at most the context length on their own).
inline constexpr int64_t kMaxRequestTokens = int64_t(1) << 22;

}  // namespace pypto
