#pragma once
// The tokenizer.json post-processor: what encode(text, add_special_tokens = true) adds around the
// ids. Qwen's chat models have a ByteLevel one, which adds nothing; Qwen3-Embedding's (added to
// its tokenizer.json after release) is a TemplateProcessing that appends <|endoftext|> to every
// single sequence, the token whose hidden state is the embedding.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace pypto {

struct PostProcessor {
  std::vector<int32_t> prefix, suffix;  // special-token ids before / after a single sequence
};

// Reads `post_processor` (null, ByteLevel, TemplateProcessing, or a Sequence of those). A
// TemplateProcessing's `single` template must be special tokens around the one sequence "A";
// anything else is an Error naming what is not implemented.
PostProcessor read_post_processor(const nlohmann::json& j);

}  // namespace pypto
