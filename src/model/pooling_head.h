#pragma once
// What a pooling model (--runner pooling, io/pooling_config.h) returns for each output row of a
// step in place of the vocabulary's logits. The rows are those a generate model would sample
// from: the last scheduled token of each request that reaches the end of its prompt.
//  - Hidden: the final-normed hidden state [hidden] (embeddings; the server slices and normalises);
//  - TokenLogits: the logits of a few tokens only, h · W[token] for the head rows W[token]
//    (Qwen3-Reranker: [no, yes]) — two dot products instead of a 151,936-row lm_head.
// Both are computed row by row in a fixed order, so a row's values do not depend on the other
// rows of the step (batch-invariant, bit for bit).
#include <cstdint>
#include <vector>

namespace pypto {

struct PoolingHead {
  enum class Kind { None, Hidden, TokenLogits };
  Kind kind = Kind::None;
  std::vector<int32_t> token_ids;  // TokenLogits: which head rows
  std::vector<float> rows;         // TokenLogits: [token_ids.size(), hidden] f32 copies of them

  // Floats per output row: `vocab` (None), `hidden` or the number of tokens.
  int64_t width(int64_t vocab, int64_t hidden) const;
};

// out [n, width] from the final-normed rows h [n, hidden]. kind must not be None.
void pooling_head_forward(const PoolingHead& head, const float* h, int64_t n, int64_t hidden, float* out);

}  // namespace pypto
