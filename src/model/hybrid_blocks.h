#pragma once
// The pieces the Qwen3.5 / Qwen3.6 gated full-attention layers and the Qwen3.5-MoE MLP add to
// the Qwen3 forward pass (transformers' Qwen3_5Attention, Qwen3_5MoeSparseMoeBlock).
#include <cstdint>

#include "core/arena.h"
#include "kernels/backend.h"
#include "model/hybrid_weights.h"

namespace pypto {

// RoPE on dims [0, rot_dim) of every head of x [m, n_heads, head_dim] (rotate-half within those
// dims: pairs (i, i + rot_dim / 2), inv_freq θ^(−2i / rot_dim)); dims [rot_dim, head_dim) pass
// through. rot_dim == head_dim is the plain op. scratch: m · n_heads · rot_dim floats.
void partial_rope(Backend& be, float* x, const int32_t* positions, int64_t m, int32_t n_heads, int32_t head_dim,
                  int32_t rot_dim, const RopeSpec& rope, float* scratch);

// attn[i] *= sigmoid(gate[i]) for i < n (the attention output gate, per head and dim).
void apply_output_gate(Backend& be, float* attn, const float* gate, int64_t rows, int64_t row_len, int64_t gate_stride);

// Qwen3.5-MoE's shared expert: out[t] += sigmoid(gate · h[t]) · down(silu(gate_proj h[t]) · up_proj h[t]).
class SharedExpert {
 public:
  SharedExpert(Backend& backend, int64_t hidden, int64_t inter) : backend_(backend), hidden_(hidden), inter_(inter) {}
  void take_scratch(Arena& arena, int64_t T);
  void add(const SharedExpertWeights& W, const float* h, int64_t T, float* out);

 private:
  Backend& backend_;
  int64_t hidden_, inter_, rows_ = 0;
  float *gate_up_ = nullptr, *act_ = nullptr, *y_ = nullptr, *g_ = nullptr;  // [T, 2I], [T, I], [T, H], [T]
};

}  // namespace pypto
