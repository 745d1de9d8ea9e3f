#pragma once
// A single-sequence driver for tools and tests: runs one prompt through the model over a private
// paged KV cache, `chunk` tokens per forward call (chunked prefill), and returns the logits of
// every position. The engine's ModelRunner does the general multi-sequence version.
#include <cstdint>
#include <vector>

#include "model/qwen3_model.h"

namespace pypto {

struct PromptLogitsOptions {
  DType kv_dtype = DType::BF16;
  int32_t chunk = 0;        // tokens per forward call; 0 = the whole prompt at once
  int32_t block_size = 16;  // KV cache block size
};

// Returns logits [ids.size(), vocab] f32, row i = the distribution after token ids[i].
std::vector<float> prompt_logits(Qwen3Model& model, const std::vector<int32_t>& ids, const PromptLogitsOptions& opt);

}  // namespace pypto
