#pragma once
// The bf16-dot variants of linear (AVX-512 BF16 only, bf16 weights only), on W packed as pair
// panels (kernels/cpu/bf16_panels.h). VDPBF16PS multiplies 32 bf16 pairs and adds them into 16 f32
// lanes per instruction: twice the multiply-adds of an f32 FMA, and W is read as stored (no
// widening). x must be given in bf16:
//   bf16 activations:    x ≈ hi = bf16(x): 8 significant bits, one VDPBF16PS per pair of k;
//   split activations:   x ≈ hi + lo with lo = bf16(x - hi): ~16 significant bits, two VDPBF16PS
//                        per pair (hi then lo into the same accumulator).
//
// Register tile: R ≤ 6 rows of x by V ≤ 4 panels (64 columns), 24 accumulators of 16 outputs. Per
// pair q: V loads of W (16 columns × the pair), and for each row one broadcast of x's pair
// (x[2q], x[2q + 1]) as a 32-bit value, R × V dot products. Measured on one core: 97 % of the
// VDPBF16PS peak at 512 rows (the previous lanes-along-k kernel: 61-70 %, its horizontal sums
// and x loads in the way).
//
// Order, the same for every output whatever m, the tile or the thread: acc = 0; for q = 0, 1, ...:
// acc = dpbf16(acc, x pair q, w pair q) (hi then lo when split); y = acc + bias. So the op is
// batch-invariant. The sum runs in one f32 lane over k / 2 pairs (the cost: a rounding bound of
// ~k · 2^-24 · Σ|x w| instead of ~k / 16 · 2^-24 · Σ|x w| for 16 interleaved partial sums; in
// practice errors grow like √k: with split activations the linear test measures 2.1e-6 / 3.3e-6
// of max|y| at k = 1024 / 3072, and the model's logits stay within 1.2e-4 of the reference).
#include <cstdint>

#include "kernels/cpu/bf16_panels.h"
#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::PYPTO_ISA_NS {

#if defined(__AVX512BF16__)
constexpr int kPanelRows = 6;   // R: rows of x per register tile
constexpr int kPanelGroup = 4;  // V: panels per register tile (64 columns)

// x's pair q of a row as a broadcast (the pair is two adjacent bf16: one 32-bit load).
inline __m512bh pair_bcast(const uint16_t* row, int64_t q) {
  int32_t v;
  std::memcpy(&v, row + 2 * q, sizeof v);
  return (__m512bh)_mm512_set1_epi32(v);
}
// The last pair of an odd-k row: x[k - 1] and a zero (W's pad is zero too).
inline __m512bh last_single_bcast(const uint16_t* row, int64_t k) {
  return (__m512bh)_mm512_set1_epi32(static_cast<int32_t>(row[k - 1]));
}

// y[i, 16v + c] = Σ_q pair products (+ bias) for rows i < R and panels v < V of this tile.
//   xh/xl [R, k] with row stride ldx; wp: the first panel, panels `pstride` elements apart;
//   y with row stride ldy; cols: valid columns of the tile (< 16V only at the end of W).
template <int R, int V, bool SPLIT>
inline void panel_tile(const uint16_t* xh, const uint16_t* xl, int64_t ldx, const uint16_t* wp, int64_t pstride,
                       int64_t k, const float* bias, float* y, int64_t ldy, int64_t cols) {
  __m512 acc[R][V];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  const int64_t full = k / 2;
  for (int64_t q = 0; q < full; ++q) {
    __m512bh w[V];
    for (int v = 0; v < V; ++v) w[v] = (__m512bh)_mm512_loadu_si512(wp + v * pstride + q * 32);
    for (int i = 0; i < R; ++i) {
      const __m512bh xb = pair_bcast(xh + i * ldx, q);
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], xb, w[v]);
      if constexpr (SPLIT) {
        const __m512bh xlb = pair_bcast(xl + i * ldx, q);
        for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], xlb, w[v]);
      }
    }
  }
  if (k & 1) {
    __m512bh w[V];
    for (int v = 0; v < V; ++v) w[v] = (__m512bh)_mm512_loadu_si512(wp + v * pstride + full * 32);
    for (int i = 0; i < R; ++i) {
      const __m512bh xb = last_single_bcast(xh + i * ldx, k);
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], xb, w[v]);
      if constexpr (SPLIT) {
        const __m512bh xlb = last_single_bcast(xl + i * ldx, k);
        for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], xlb, w[v]);
      }
    }
  }
  for (int v = 0; v < V; ++v) {
    const int64_t c = cols - 16 * v;  // > 0 for every v < V (the caller sizes V to the columns)
    const __mmask16 mask = c >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << c) - 1u);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + 16 * v) : _mm512_setzero_ps();
    for (int i = 0; i < R; ++i) {
      const __m512 out = bias ? _mm512_add_ps(acc[i][v], b) : acc[i][v];
      _mm512_mask_storeu_ps(y + i * ldy + 16 * v, mask, out);
    }
  }
}

template <int V, bool SPLIT>
inline void panel_tile_rows(int64_t r, const uint16_t* xh, const uint16_t* xl, int64_t ldx, const uint16_t* wp,
                            int64_t pstride, int64_t k, const float* bias, float* y, int64_t ldy, int64_t cols) {
  switch (r) {
    case 6: panel_tile<6, V, SPLIT>(xh, xl, ldx, wp, pstride, k, bias, y, ldy, cols); break;
    case 5: panel_tile<5, V, SPLIT>(xh, xl, ldx, wp, pstride, k, bias, y, ldy, cols); break;
    case 4: panel_tile<4, V, SPLIT>(xh, xl, ldx, wp, pstride, k, bias, y, ldy, cols); break;
    case 3: panel_tile<3, V, SPLIT>(xh, xl, ldx, wp, pstride, k, bias, y, ldy, cols); break;
    case 2: panel_tile<2, V, SPLIT>(xh, xl, ldx, wp, pstride, k, bias, y, ldy, cols); break;
    default: panel_tile<1, V, SPLIT>(xh, xl, ldx, wp, pstride, k, bias, y, ldy, cols); break;
  }
}

// Columns [n0, n1) (n0 a multiple of 16) for all rows: panel groups of 64 columns, and for each
// group every R-row tile of x in turn (the group, ≤ 4 panels × k · 32 bytes, stays in L2).
// (Prefetching the next group into L1 or L2, spread over the tiles, measured no faster at 16 rows:
// the hardware prefetcher already follows the 4 panel streams.)
template <bool SPLIT>
inline void linear_cols_panels(const uint16_t* xh, const uint16_t* xl, const LinearTask& t, int64_t n0, int64_t n1) {
  const auto* w = static_cast<const uint16_t*>(t.w);
  const int64_t pstride = bf16_panel_elems(t.k);
  const int64_t group_cols = kPanelCols * kPanelGroup;
  for (int64_t c0 = n0; c0 < n1; c0 += group_cols) {
    const int64_t cols = n1 - c0 < group_cols ? n1 - c0 : group_cols;
    const int64_t panels = (cols + kPanelCols - 1) / kPanelCols;
    const uint16_t* wp = w + (c0 / kPanelCols) * pstride;
    const float* bias = t.bias ? t.bias + c0 : nullptr;
    for (int64_t i = 0; i < t.m; i += kPanelRows) {
      const int64_t r = t.m - i < kPanelRows ? t.m - i : kPanelRows;
      const uint16_t* xli = SPLIT ? xl + i * t.k : nullptr;
      float* y = t.y + i * t.n_out + c0;
      switch (panels) {
        case 4: panel_tile_rows<4, SPLIT>(r, xh + i * t.k, xli, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        case 3: panel_tile_rows<3, SPLIT>(r, xh + i * t.k, xli, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        case 2: panel_tile_rows<2, SPLIT>(r, xh + i * t.k, xli, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        default: panel_tile_rows<1, SPLIT>(r, xh + i * t.k, xli, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
      }
    }
  }
}

// xl == nullptr: bf16 activations; else split activations (x ≈ xh + xl). W in pair panels.
inline void linear_cols_bf16dot(const uint16_t* xh, const uint16_t* xl, const LinearTask& t, int64_t n0, int64_t n1) {
  if (xl)
    linear_cols_panels<true>(xh, xl, t, n0, n1);
  else
    linear_cols_panels<false>(xh, xl, t, n0, n1);
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

// One row of x [k] into its line of the AMX A tiles (kernel_table.h AmxActivations): for each 32 k
// s, 64 bytes at dst + 512 s of part 0 (hi = bf16(x), as split_bf16 and from_f32 round) and, with
// parts == 2, of part 1 at dst + part_elems (lo = bf16(x - hi)); zeros past k. Converting straight
// into the tiles saves the row buffer and the scatter copy of each 64-byte piece.
inline void x_row_to_amx_tiles(const float* x, int64_t k, int parts, uint16_t* dst, int64_t part_elems) {
  for (int64_t j = 0, s = 0; j < k; j += 32, ++s) {
    const int r0 = k - j < 16 ? static_cast<int>(k - j) : 16;
    const int r1 = k - j - 16 <= 0 ? 0 : k - j - 16 < 16 ? static_cast<int>(k - j - 16) : 16;
    const vf v0 = vload_n(x + j, r0);
    const vf v1 = r1 ? vload_n(x + j + 16, r1) : vzero();
    const __m256i h0 = to_bf16_bits(v0), h1 = to_bf16_bits(v1);
    uint16_t* d = dst + 512 * s;
    _mm512_storeu_si512(d, _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1));
    if (parts == 2) {
      const vf f0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h0), 16));
      const vf f1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h1), 16));
      const __m256i l0 = to_bf16_bits(vsub(v0, f0)), l1 = to_bf16_bits(vsub(v1, f1));
      _mm512_storeu_si512(d + part_elems, _mm512_inserti64x4(_mm512_castsi256_si512(l0), l1, 1));
    }
  }
}
#endif

}  // namespace pypto::cpu::PYPTO_ISA_NS
