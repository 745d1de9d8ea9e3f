#include "model/moe_router.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pypto {

void route_token(float* logits, int32_t num_experts, int32_t top_k, bool norm_topk_prob, int32_t* expert,
                 float* weight) {
  PYPTO_ASSERT(num_experts > 0 && top_k >= 1 && top_k <= num_experts, "top-", top_k, " of ", num_experts, " experts");
  // Softmax over all E logits, as torch.softmax(dtype=float32): exp(l - max) / Σ exp(l - max).
  float* p = logits;  // [E], probabilities in place
  float m = p[0];
  for (int32_t e = 1; e < num_experts; ++e) m = std::max(m, p[e]);
  float sum = 0.0f;
  for (int32_t e = 0; e < num_experts; ++e) {
    p[e] = std::exp(p[e] - m);
    sum += p[e];
  }
  const float inv = 1.0f / sum;
  for (int32_t e = 0; e < num_experts; ++e) p[e] *= inv;

  // Top-k by selection: k passes, each taking the largest probability not yet taken; the strict
  // `>` keeps the lower index on a tie. O(k·E): 1024 compares for 8 of 128, cheaper than the
  // router's product that produced the logits.
  float selected = 0.0f;
  for (int32_t j = 0; j < top_k; ++j) {
    int32_t best = -1;
    for (int32_t e = 0; e < num_experts; ++e) {
      bool taken = false;
      for (int32_t i = 0; i < j; ++i) taken |= expert[i] == e;
      if (!taken && (best < 0 || p[e] > p[best])) best = e;
    }
    PYPTO_ASSERT(best >= 0, "top-k selection found no expert");
    expert[j] = best;
    weight[j] = p[best];
    selected += p[best];
  }
  // Renormalise in f32 (transformers v5 keeps the routing weights in f32; v4 rounds them to the
  // model dtype, which an f32 engine has no reason to copy).
  if (norm_topk_prob)
    for (int32_t j = 0; j < top_k; ++j) weight[j] /= selected;
}

void group_by_expert(const int32_t* expert, const float* weight, int64_t num_tokens, int32_t num_experts,
                     int32_t top_k, int32_t* offsets, int32_t* tokens, float* weights) {
  // Counting sort by expert; walking the tokens in order keeps each expert's list ascending.
  for (int32_t e = 0; e <= num_experts; ++e) offsets[e] = 0;
  const int64_t n = num_tokens * top_k;
  for (int64_t i = 0; i < n; ++i) {
    PYPTO_ASSERT(expert[i] >= 0 && expert[i] < num_experts, "expert id ", expert[i]);
    ++offsets[expert[i] + 1];
  }
  for (int32_t e = 0; e < num_experts; ++e) offsets[e + 1] += offsets[e];
  // offsets[e] serves as expert e's fill cursor, then is shifted back.
  for (int64_t i = 0; i < n; ++i) {
    const int32_t at = offsets[expert[i]]++;
    tokens[at] = static_cast<int32_t>(i / top_k);
    weights[at] = weight[i];
  }
  for (int32_t e = num_experts; e > 0; --e) offsets[e] = offsets[e - 1];
  offsets[0] = 0;
}

}  // namespace pypto
