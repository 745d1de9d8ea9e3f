#include "model/hybrid_blocks.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/profiler.h"

namespace pypto {

void partial_rope(Backend& be, float* x, const int32_t* positions, int64_t m, int32_t n_heads, int32_t head_dim,
                  int32_t rot_dim, const RopeSpec& rope, float* scratch) {
  if (rot_dim == head_dim) return be.rope(x, positions, m, n_heads, head_dim, rope);
  PYPTO_ASSERT(rot_dim > 0 && rot_dim < head_dim && rot_dim % 2 == 0, "rotary dims ", rot_dim, " of ", head_dim);
  const int64_t heads = m * n_heads;
  // The rotated dims of every head, gathered [m, n_heads, rot_dim], rotated as heads of rot_dim
  // (the op's inv_freq θ^(−2i / head_dim) with head_dim = rot_dim is exactly the partial one).
  for (int64_t r = 0; r < heads; ++r)
    std::memcpy(scratch + r * rot_dim, x + r * head_dim, sizeof(float) * size_t(rot_dim));
  be.rope(scratch, positions, m, n_heads, rot_dim, rope);
  be.synchronize();
  for (int64_t r = 0; r < heads; ++r)
    std::memcpy(x + r * head_dim, scratch + r * rot_dim, sizeof(float) * size_t(rot_dim));
}

void apply_output_gate(Backend& be, float* attn, const float* gate, int64_t rows, int64_t row_len, int64_t gate_stride) {
  be.synchronize();
  be.parallel_rows(rows, [&](int64_t t) {
    float* a = attn + t * row_len;
    const float* g = gate + t * gate_stride;
    for (int64_t i = 0; i < row_len; ++i) a[i] *= 1.0f / (1.0f + std::exp(-g[i]));
  });
}

void SharedExpert::take_scratch(Arena& arena, int64_t T) {
  rows_ = T;
  gate_up_ = arena.alloc_array<float>(size_t(T * 2 * inter_));
  act_ = arena.alloc_array<float>(size_t(T * inter_));
  y_ = arena.alloc_array<float>(size_t(T * hidden_));
  g_ = arena.alloc_array<float>(size_t(T));
}

void SharedExpert::add(const SharedExpertWeights& W, const float* h, int64_t T, float* out) {
  PYPTO_ASSERT(T <= rows_, "shared expert scratch holds ", rows_, " rows, the step has ", T);
  Backend& be = backend_;
  PYPTO_PROF_OP("moe.shared_expert");
  be.linear(h, T, W.gate_up, nullptr, gate_up_);  // [T, gate (I) | up (I)]
  be.silu_mul(gate_up_, T, inter_, act_);         // [T, I]
  be.linear(act_, T, W.down, nullptr, y_);        // [T, hidden]
  be.linear(h, T, W.gate, nullptr, g_);           // [T, 1]
  be.synchronize();
  be.parallel_rows(T, [&](int64_t t) {
    const float s = 1.0f / (1.0f + std::exp(-g_[t]));
    float* o = out + t * hidden_;
    const float* y = y_ + t * hidden_;
    for (int64_t c = 0; c < hidden_; ++c) o[c] += s * y[c];
  });
}

}  // namespace pypto
