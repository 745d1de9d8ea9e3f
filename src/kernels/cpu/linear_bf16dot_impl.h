#pragma once
// The bf16-activation variant of linear (AVX-512 BF16 only, bf16 weights only): x is rounded to
// bf16 once per call and each output is accumulated with VDPBF16PS, which multiplies 32 bf16 pairs
// and adds them into 16 f32 lanes per instruction: twice the multiply-adds of an f32 FMA, and W is
// read as stored (no widening). The price is precision: x carries 8 significant bits instead of 24
// (see the measurements in the kernels report). The order is still fixed per output element, so
// this path is batch-invariant too: lane l accumulates k = 2l, 2l+1 (+32, +64, ...), then the same
// hsum() tree, then the bias.
#include <cstdint>

#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::PYPTO_ISA_NS {

#if defined(__AVX512BF16__)
inline __m512bh load_bh(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load_bh_n(const uint16_t* p, int n) {
  return (__m512bh)_mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t(1) << n) - 1), p);
}

// y[i, j] = Σ_k xb[i, k] · w[j, k] (+ bias[j]); xb, w bf16; tiles as in linear_impl.h.
template <int MR, int NR>
inline void dot_tile_bf16(const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw, int64_t k,
                          const float* bias, float* y, int64_t ldy) {
  vf acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = vzero();
  int64_t kk = 0;
  for (; kk + 32 <= k; kk += 32) {
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load_bh(w + j * ldw + kk);
    for (int i = 0; i < MR; ++i) {
      __m512bh xv = load_bh(x + i * ldx + kk);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
  if (kk < k) {
    const int rest = static_cast<int>(k - kk);
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load_bh_n(w + j * ldw + kk, rest);
    for (int i = 0; i < MR; ++i) {
      __m512bh xv = load_bh_n(x + i * ldx + kk, rest);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
    }
  }
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) {
      float s = hsum(acc[i][j]);
      if (bias) s += bias[j];
      y[i * ldy + j] = s;
    }
}

template <int NR>
inline void dot_tile_bf16_rows(int64_t mr, const uint16_t* x, int64_t ldx, const uint16_t* w, int64_t ldw,
                               int64_t k, const float* bias, float* y, int64_t ldy) {
  switch (mr) {
    case 4: dot_tile_bf16<4, NR>(x, ldx, w, ldw, k, bias, y, ldy); break;
    case 3: dot_tile_bf16<3, NR>(x, ldx, w, ldw, k, bias, y, ldy); break;
    case 2: dot_tile_bf16<2, NR>(x, ldx, w, ldw, k, bias, y, ldy); break;
    default: dot_tile_bf16<1, NR>(x, ldx, w, ldw, k, bias, y, ldy); break;
  }
}

// Columns [n0, n1) for all rows; xb is x already rounded to bf16 ([m, k]).
template <int NR>
inline void linear_cols_bf16_nr(const uint16_t* xb, const LinearTask& t, int64_t n0, int64_t n1) {
  const auto* w = static_cast<const uint16_t*>(t.w);
  int64_t j = n0;
  // Row blocks of W small enough to stay in L2 while every x tile passes over them.
  const int64_t block = (256 * 1024 / (t.k * 2)) / NR * NR > NR ? (256 * 1024 / (t.k * 2)) / NR * NR : NR;
  for (int64_t b0 = n0; b0 < n1; b0 += block) {
    const int64_t b1 = b0 + block < n1 ? b0 + block : n1;
    for (int64_t i = 0; i < t.m; i += 4) {
      const int64_t mr = t.m - i < 4 ? t.m - i : 4;
      for (j = b0; j + NR <= b1; j += NR)
        dot_tile_bf16_rows<NR>(mr, xb + i * t.k, t.k, w + j * t.k, t.k, t.k, t.bias ? t.bias + j : nullptr,
                               t.y + i * t.n_out + j, t.n_out);
      for (; j < b1; ++j)
        dot_tile_bf16_rows<1>(mr, xb + i * t.k, t.k, w + j * t.k, t.k, t.k, t.bias ? t.bias + j : nullptr,
                              t.y + i * t.n_out + j, t.n_out);
    }
  }
}

inline void linear_cols_bf16dot(const uint16_t* xb, const LinearTask& t, int64_t n0, int64_t n1) {
  if (t.m == 1)
    linear_cols_bf16_nr<8>(xb, t, n0, n1);
  else
    linear_cols_bf16_nr<6>(xb, t, n0, n1);
}
#endif

}  // namespace pypto::cpu::PYPTO_ISA_NS
