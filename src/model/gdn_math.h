#pragma once
// The Gated DeltaNet's element-wise pieces, shared by the step-wide path (model/gated_deltanet.cpp)
// and the fused decode path (model/gdn_decode.cpp) so that both compute every value with the same
// operations in the same order: a decode row gives the same bits through either.
#include <cmath>
#include <cstdint>

namespace pypto::gdn {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// softplus as torch computes it (threshold 20: x itself above it).
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// x[0, d) ← x · rsqrt(Σx² + 1e-6) · scale (transformers' / FLA's l2norm, eps 1e-6).
inline void l2norm(float* x, int32_t d, float scale) {
  float ss = 0.0f;
  for (int32_t i = 0; i < d; ++i) ss += x[i] * x[i];
  const float inv = scale / std::sqrt(ss + 1e-6f);
  for (int32_t i = 0; i < d; ++i) x[i] *= inv;
}

// One row of the causal depthwise conv over nc channels: out[c] = SiLU(Σ_j w[j · ws + c] · x[j][c]),
// j = 0 .. K−1 ascending (w tap-major with row stride ws; x[j]: the window's row j, oldest first).
inline void conv_silu_row(const float* w, int64_t ws, const float* const* x, int32_t K, int64_t nc, float* acc,
                          float* out) {
  for (int64_t c = 0; c < nc; ++c) acc[c] = 0.0f;
  for (int32_t j = 0; j < K; ++j) {
    const float* xj = x[j];
    const float* wj = w + j * ws;
    for (int64_t c = 0; c < nc; ++c) acc[c] += wj[c] * xj[c];
  }
  for (int64_t c = 0; c < nc; ++c) out[c] = silu(acc[c]);
}

// The gates of value heads [v0, v1) from a row's b and a (each [n_v]): β = σ(b),
// g = −exp(A_log) · softplus(a + dt_bias) (neg_exp_a = −exp(A_log)).
inline void gates(const float* b, const float* a, const float* neg_exp_a, const float* dt_bias, int32_t v0, int32_t v1,
                  float* beta, float* g) {
  for (int32_t v = v0; v < v1; ++v) {
    beta[v] = sigmoid(b[v]);
    g[v] = neg_exp_a[v] * softplus(a[v] + dt_bias[v]);
  }
}

}  // namespace pypto::gdn
