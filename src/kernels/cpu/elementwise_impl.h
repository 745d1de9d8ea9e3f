#pragma once
// Row-wise ops (rms_norm, rope, silu_mul) and conversions (embedding rows, residual add, KV
// stores), compiled once per ISA (include after simd.h). Each works on whole rows, so a row's
// result never depends on the other rows of the call.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::PYPTO_ISA_NS {

// y[r, :] = x[r, :] / sqrt(mean(x[r, :]²) + eps) · gamma, for rows [r0, r1) of [m, d].
// The sum of squares uses the same lane-then-tree order as the dot products.
inline void rms_norm_rows(const float* x, const float* gamma, int64_t r0, int64_t r1, int64_t d, float eps,
                          float* y) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * d;
    float* yr = y + r * d;
    vf acc = vzero();
    int64_t j = 0;
    for (; j + kLanes <= d; j += kLanes) {
      vf v = vload(xr + j);
      acc = vfma(v, v, acc);
    }
    const int rest = static_cast<int>(d - j);
    if (rest) {
      vf v = vload_n(xr + j, rest);
      acc = vfma(v, v, acc);
    }
    const float inv = 1.0f / std::sqrt(hsum(acc) / static_cast<float>(d) + eps);
    const vf vinv = vset1(inv);
    for (j = 0; j + kLanes <= d; j += kLanes) vstore(yr + j, vmul(vmul(vload(xr + j), vinv), vload(gamma + j)));
    if (rest) vstore_n(yr + j, vmul(vmul(vload_n(xr + j, rest), vinv), vload_n(gamma + j, rest)), rest);
  }
}

// Rotate-half RoPE on rows [r0, r1) of x[m, n_heads, head_dim]; pair (j, j + half) of a head at
// position p turns by angle p·theta^(-2j/head_dim), whose cos / sin are cos_t[p, j], sin_t[p, j].
//   x'[j]        = x[j] cos - x[j + half] sin
//   x'[j + half] = x[j + half] cos + x[j] sin
inline void rope_rows(float* x, const int32_t* positions, int64_t r0, int64_t r1, int32_t n_heads,
                      int32_t head_dim, const float* cos_t, const float* sin_t) {
  const int32_t half = head_dim / 2;
  for (int64_t r = r0; r < r1; ++r) {
    const float* c = cos_t + static_cast<int64_t>(positions[r]) * half;
    const float* s = sin_t + static_cast<int64_t>(positions[r]) * half;
    for (int32_t h = 0; h < n_heads; ++h) {
      float* v = x + (r * n_heads + h) * head_dim;
      for (int32_t j = 0; j < half; j += kLanes) {
        const int n = half - j < kLanes ? half - j : kLanes;
        vf x1 = vload_n(v + j, n), x2 = vload_n(v + half + j, n);
        vf cj = vload_n(c + j, n), sj = vload_n(s + j, n);
        vstore_n(v + j, vsub(vmul(x1, cj), vmul(x2, sj)), n);
        vstore_n(v + half + j, vadd(vmul(x2, cj), vmul(x1, sj)), n);
      }
    }
  }
}

// out[r, j] = silu(g) · u with g = gate_up[r, j], u = gate_up[r, inter + j], silu(g) = g / (1 + e^-g).
inline void silu_mul_rows(const float* gate_up, int64_t r0, int64_t r1, int64_t inter, float* out) {
  const vf one = vset1(1.0f), zero = vzero();
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out + r * inter;
    for (int64_t j = 0; j < inter; j += kLanes) {
      const int n = inter - j < kLanes ? static_cast<int>(inter - j) : kLanes;
      vf gv = vload_n(g + j, n);
      vf silu = vdiv(gv, vadd(one, vexp(vsub(zero, gv))));
      vstore_n(o + j, vmul(silu, vload_n(u + j, n)), n);
    }
  }
}

inline void to_f32(const void* src, DType dtype, int64_t n, float* dst) {
  int64_t j = 0;
  const int rest = static_cast<int>(n % kLanes);
  if (dtype == DType::F32) {
    const float* s = static_cast<const float*>(src);
    for (; j + kLanes <= n; j += kLanes) vstore(dst + j, vload(s + j));
    if (rest) vstore_n(dst + j, vload_n(s + j, rest), rest);
  } else if (dtype == DType::BF16) {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (; j + kLanes <= n; j += kLanes) vstore(dst + j, load_bf16(s + j));
    if (rest) vstore_n(dst + j, load_bf16_n(s + j, rest), rest);
  } else {
    const uint16_t* s = static_cast<const uint16_t*>(src);
    for (; j + kLanes <= n; j += kLanes) vstore(dst + j, load_f16(s + j));
    if (rest) vstore_n(dst + j, load_f16_n(s + j, rest), rest);
  }
}

inline void add_f32(float* y, const float* x, int64_t n) {
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) vstore(y + j, vadd(vload(y + j), vload(x + j)));
  const int rest = static_cast<int>(n - j);
  if (rest) vstore_n(y + j, vadd(vload_n(y + j, rest), vload_n(x + j, rest)), rest);
}

inline void from_f32(const float* src, int64_t n, void* dst, DType dtype) {
  int64_t j = 0;
  const int rest = static_cast<int>(n % kLanes);
  if (dtype == DType::F32) {
    float* d = static_cast<float*>(dst);
    for (; j + kLanes <= n; j += kLanes) vstore(d + j, vload(src + j));
    if (rest) vstore_n(d + j, vload_n(src + j, rest), rest);
  } else {
    uint16_t* d = static_cast<uint16_t*>(dst);
    for (; j + kLanes <= n; j += kLanes) store_bf16(d + j, vload(src + j));
    if (rest) store_bf16_n(d + j, vload_n(src + j, rest), rest);
  }
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
