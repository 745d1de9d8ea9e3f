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
  // > 0: only the last `last` positions' logits are computed and returned (a 32K-token prompt's
  // logits for every position would be 19 GB); 0: every position.
  int32_t last = 0;
};

// Returns logits [rows, vocab] f32 for the last rows = min(last, T) positions (every position when
// last is 0): row i = the distribution after token ids[T - rows + i].
std::vector<float> prompt_logits(Qwen3Model& model, const std::vector<int32_t>& ids, const PromptLogitsOptions& opt);

}  // namespace pypto
