#pragma once
// The bf16-dot variants of linear (AVX-512 BF16 only, bf16 weights only). VDPBF16PS multiplies 32
// bf16 pairs and adds them into 16 f32 lanes per instruction: twice the multiply-adds of an f32
// FMA, and W is read as stored (no widening). x must be given in bf16:
//   bf16 activations:    x ≈ hi = bf16(x): 8 significant bits (the kernels report measures the
//                        whole-model cost), one VDPBF16PS per 32 k;
//   split activations:   x ≈ hi + lo with lo = bf16(x - hi): ~16 significant bits, two VDPBF16PS
//                        per 32 k (hi then lo into the same accumulator): the f32-FMA rate, but no
//                        widening of W and half the bytes per W element in the caches.
// The order is fixed per output element, so both are batch-invariant: lane l accumulates k = 2l,
// 2l+1 (+32, +64, ...), hi before lo, then the same hsum() tree, then the bias.
#include <cstdint>

#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::PYPTO_ISA_NS {

#if defined(__AVX512BF16__)
inline __m512bh load_bh(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh load_bh_n(const uint16_t* p, int n) {
  return (__m512bh)_mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t(1) << n) - 1), p);
}

// y[i, j] = Σ_k x[i, k] · w[j, k] (+ bias[j]); x = xh (+ xl when SPLIT), all bf16; [MR, k] / [NR, k].
// pf: lines to prefetch while computing (a hint: the arithmetic is unchanged).
// `pf_bytes` bytes from `pf` (part of the next W tile), issued evenly over this tile's k steps.
struct TilePrefetch {
  const char* pf = nullptr;
  int64_t pf_bytes = 0;
};

template <int MR, int NR, bool SPLIT>
inline void dot_tile_bf16(const uint16_t* xh, const uint16_t* xl, int64_t ldx, const uint16_t* w, int64_t ldw,
                          int64_t k, const float* bias, float* y, int64_t ldy, TilePrefetch pf = {}) {
  vf acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = vzero();
  // Lines per k step (at least one while any remain): the share spread over k / 32 steps.
  const int64_t steps = k / 32 > 0 ? k / 32 : 1;
  const int64_t pf_lines = (pf.pf_bytes + 63) / 64, per_step = (pf_lines + steps - 1) / steps;
  int64_t pf_next = 0;
  int64_t kk = 0;
  for (; kk + 32 <= k; kk += 32) {
    for (int64_t q = 0; q < per_step && pf_next < pf_lines; ++q, ++pf_next)
      _mm_prefetch(pf.pf + pf_next * 64, _MM_HINT_T0);
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load_bh(w + j * ldw + kk);
    for (int i = 0; i < MR; ++i) {
      __m512bh xv = load_bh(xh + i * ldx + kk);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
      if constexpr (SPLIT) {
        __m512bh xlv = load_bh(xl + i * ldx + kk);
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xlv, wv[j]);
      }
    }
  }
  if (kk < k) {
    const int rest = static_cast<int>(k - kk);
    __m512bh wv[NR];
    for (int j = 0; j < NR; ++j) wv[j] = load_bh_n(w + j * ldw + kk, rest);
    for (int i = 0; i < MR; ++i) {
      __m512bh xv = load_bh_n(xh + i * ldx + kk, rest);
      for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, wv[j]);
      if constexpr (SPLIT) {
        __m512bh xlv = load_bh_n(xl + i * ldx + kk, rest);
        for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xlv, wv[j]);
      }
    }
  }
  tile_store<MR, NR>(acc, bias, y, ldy);  // linear_impl.h: hsum8 of the lane sums, + bias
}

template <int NR, bool SPLIT>
inline void dot_tile_bf16_rows(int64_t mr, const uint16_t* xh, const uint16_t* xl, int64_t ldx, const uint16_t* w,
                               int64_t ldw, int64_t k, const float* bias, float* y, int64_t ldy,
                               TilePrefetch pf = {}) {
  switch (mr) {
    case 4: dot_tile_bf16<4, NR, SPLIT>(xh, xl, ldx, w, ldw, k, bias, y, ldy, pf); break;
    case 3: dot_tile_bf16<3, NR, SPLIT>(xh, xl, ldx, w, ldw, k, bias, y, ldy, pf); break;
    case 2: dot_tile_bf16<2, NR, SPLIT>(xh, xl, ldx, w, ldw, k, bias, y, ldy, pf); break;
    default: dot_tile_bf16<1, NR, SPLIT>(xh, xl, ldx, w, ldw, k, bias, y, ldy, pf); break;
  }
}

// Columns [n0, n1) for all rows. Rows of x in passes that stay in L2 (≤ 512 KiB of bf16 x: 128
// rows at k = 1024 with hi only, 40 with hi + lo at k = 3072, the down projection); within a pass
// each W tile (NR rows, read as stored) stays in L1 while every 4-row x tile streams past.
template <int NR, bool SPLIT>
inline void linear_cols_bf16_nr(const uint16_t* xh, const uint16_t* xl, const LinearTask& t, int64_t n0, int64_t n1) {
  const auto* w = static_cast<const uint16_t*>(t.w);
  const int64_t row_bytes = t.k * int64_t(sizeof(uint16_t)) * (SPLIT ? 2 : 1);
  int64_t kPass = (int64_t(512) << 10) / row_bytes / 4 * 4;
  kPass = kPass < 4 ? 4 : kPass > 128 ? 128 : kPass;
  for (int64_t m0 = 0; m0 < t.m; m0 += kPass) {
    const int64_t m1 = m0 + kPass < t.m ? m0 + kPass : t.m;
    const int64_t x_tiles = (m1 - m0 + 3) / 4;
    for (int64_t j = n0; j < n1;) {
      const int64_t nr = n1 - j >= NR ? NR : 1;
      // While a W tile computes, the next one (NR rows, contiguous) is prefetched, its lines
      // split evenly over the tile's x tiles and their k steps: a steady trickle keeps memory busy
      // during the whole computation, where a burst at the start (the first x tile prefetching
      // it all) outran the lines one core can have in flight: 16-row decode steps were ~15 %
      // slower. Prefetching two tiles ahead into L2 measured no better. Full tiles only. Not for
      // a single row (decode of one sequence): there W is one pure stream, which the hardware
      // prefetcher already follows.
      const bool prefetch = t.m > 1 && nr == NR && j + 2 * NR <= n1;
      const int64_t tile_bytes = NR * t.k * int64_t(sizeof(uint16_t));
      const int64_t share = (tile_bytes / 64 + x_tiles - 1) / x_tiles * 64;
      const char* next = reinterpret_cast<const char*>(w + (j + NR) * t.k);
      for (int64_t i = m0; i < m1; i += 4) {
        const int64_t mr = m1 - i < 4 ? m1 - i : 4;
        const uint16_t* xli = SPLIT ? xl + i * t.k : nullptr;
        TilePrefetch pf;
        if (prefetch) {
          const int64_t off = (i - m0) / 4 * share;
          pf = {next + off, off < tile_bytes ? (share < tile_bytes - off ? share : tile_bytes - off) : 0};
        }
        if (nr == NR)
          dot_tile_bf16_rows<NR, SPLIT>(mr, xh + i * t.k, xli, t.k, w + j * t.k, t.k, t.k,
                                        t.bias ? t.bias + j : nullptr, t.y + i * t.n_out + j, t.n_out, pf);
        else
          dot_tile_bf16_rows<1, SPLIT>(mr, xh + i * t.k, xli, t.k, w + j * t.k, t.k, t.k,
                                       t.bias ? t.bias + j : nullptr, t.y + i * t.n_out + j, t.n_out);
      }
      j += nr;
    }
  }
}

// xl == nullptr: bf16 activations; else split activations (x ≈ xh + xl).
inline void linear_cols_bf16dot(const uint16_t* xh, const uint16_t* xl, const LinearTask& t, int64_t n0, int64_t n1) {
  if (xl) {
    if (t.m == 1)
      linear_cols_bf16_nr<8, true>(xh, xl, t, n0, n1);
    else
      linear_cols_bf16_nr<6, true>(xh, xl, t, n0, n1);
  } else {
    if (t.m == 1)
      linear_cols_bf16_nr<8, false>(xh, xl, t, n0, n1);
    else
      linear_cols_bf16_nr<6, false>(xh, xl, t, n0, n1);
  }
}

// hi[i] = bf16(x[i]); lo[i] = bf16(x[i] - hi[i]) (x - hi is exact in f32).
inline void split_bf16(const float* x, int64_t n, uint16_t* hi, uint16_t* lo) {
  for (int64_t j = 0; j < n; j += kLanes) {
    const int r = n - j < kLanes ? static_cast<int>(n - j) : kLanes;
    vf v = vload_n(x + j, r);
    __m256i h = to_bf16_bits(v);
    vf hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    _mm256_mask_storeu_epi16(hi + j, tail_mask(r), h);
    _mm256_mask_storeu_epi16(lo + j, tail_mask(r), to_bf16_bits(vsub(v, hf)));
  }
}
#endif

}  // namespace pypto::cpu::PYPTO_ISA_NS
