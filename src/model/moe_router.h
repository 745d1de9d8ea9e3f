#pragma once
// Token routing of a Qwen3-MoE layer, as transformers' Qwen3MoeSparseMoeBlock computes it: a
// softmax in f32 over all experts' router logits, the k most probable experts, their
// probabilities renormalised to sum to 1 iff norm_topk_prob. No capacity limit, no dropped tokens.
// Host code on f32 arrays; every token is routed on its own, so its choice never depends on the
// other rows of the step.
#include <cstdint>

namespace pypto {

// One token. logits [E] (the router's output for the token) is overwritten with the softmax
// probabilities; expert [k] receives the chosen expert ids in descending probability, weight [k]
// their routing weights.
// Ties: of equal probabilities the lower expert index is taken first. torch.topk documents no
// order for ties ("not guaranteed to be stable"), so this is a choice, not a copy: it is what
// torch's CPU topk does in practice and what ONNX TopK specifies, and it makes the choice a
// function of the logits alone.
void route_token(float* logits, int32_t num_experts, int32_t top_k, bool norm_topk_prob, int32_t* expert,
                 float* weight);

// The routed (token, weight) pairs of a step grouped by expert. From expert / weight [T, k]
// (route_token's outputs of T tokens): offsets [E + 1], and tokens / weights [T * k] where entries
// [offsets[e], offsets[e + 1]) are expert e's tokens in ascending order with their weights.
void group_by_expert(const int32_t* expert, const float* weight, int64_t num_tokens, int32_t num_experts,
                     int32_t top_k, int32_t* offsets, int32_t* tokens, float* weights);

}  // namespace pypto
