#pragma once
// y[m, n_out] = bf16(x)[m, k] · bf16(W)[n_out, k]ᵀ (+ bias) for f16 weights in column panels
// (kernels/cpu/f16_panels.h) at --matmul-precision medium, AVX-512 BF16 only.
//
// Why: at medium both inputs of a product may be bf16 (torch's "medium": bf16 internally), and
// VDPBF16PS does 32 products per instruction against an f32 FMA's 16. The f32 kernel
// (linear_f16_panels_impl.h) runs a batched decode's 16 lm_head rows of Qwen's GPTQ / AWQ
// checkpoints (151,936 × 2,048 f16) near the FMA peak (~90 G multiply-adds/s on one Zen 5 core),
// so the FMA rate, not the weight bytes, bounds it; this kernel halves the multiply-add instructions. The weights stay
// f16 in memory (as stored); each 16-column × 2-step block is rounded to bf16 as it is read:
//   a = f32(W[16p + c][j]), b = f32(W[16p + c][j + 1])            (VCVTPH2PS, exact)
//   pair[c] = (bf16(a[c]), bf16(b[c]))                             (VCVTNE2PS2BF16, RNE; VPERMW)
// then one VDPBF16PS per row and panel with x's pair (xh[i, j], xh[i, j + 1]) broadcast, xh =
// bf16(x) as the bf16-dot kernels take it.
//
// Tiles: at m = 1, 1 row × 8 panels rounded as they stream (memory-bound). At m ≥ 2, groups of 4
// panels: the first tile of ≤ 6 rows streams the group from memory, rounds it and keeps the bf16
// pairs in a per-thread scratch (256 KiB at k = 2048, in L2), the further row tiles run the
// bf16-dot kernel's 6 × 4 tiles (linear_bf16dot_impl.h panel_tile) on that copy. (Rounding the
// group into scratch in a separate pass first left the DRAM stream idle while the tiles ran: one
// thread, 16 rows, 47-53 against 44-48 ms; rounding in every tile cost as much as the products.)
// Order, the same for every output whatever m, the tile or the thread's columns: acc = 0; acc = dpbf16(acc, x pair q, w pair q) for q = 0, 1, ... (the last pair
// of an odd k holds x[k - 1] and 0 against W's zero pad); y = acc (+ bias[n]). Batch-invariant.
// f16 values all fit bf16's exponent range, so the rounding is the only change to W (≤ 2^-9
// relative, the same as x's).
#include <cstdint>
#include <cstring>

#include "kernels/cpu/f16_panels.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/linear_bf16dot_impl.h"

namespace pypto::cpu::PYPTO_ISA_NS {

#if defined(__AVX512BF16__)
constexpr int kF16DotTilePanels = 4;  // panels per converted group at m >= 2 (64 columns)
constexpr int kF16DotRowPanels = 8;   // V at m = 1 (128 columns)
// Software prefetch distance along each f16 panel stream, bytes (as the int4 kernels': the
// hardware prefetcher alone left the first row tile waiting on its loads).
constexpr int64_t kF16DotPrefetchBytes = 3072;

// Panel steps j and j + 1 (32 f16 at p, step j's 16 columns first) as 16 bf16 pairs, column c's
// pair in 32-bit lane c (low half step j), as VDPBF16PS takes them.
inline __m512bh f16_pair_to_bf16(const uint16_t* p) {
  const __m512 a = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
  const __m512 b = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p + 16)));
  // [bf16(a[0..15]) | bf16(b[0..15])] → (a[0], b[0], a[1], b[1], ...).
  const __m512i ab = (__m512i)_mm512_cvtne2ps_pbh(b, a);
  alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,  21, 6,  22, 7,  23,
                                                           8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return (__m512bh)_mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), ab);
}

// y[i, 16v + c] for rows i < R and panels v < V of one tile.
//   xh [R, k] bf16 with row stride ldx; wp: the tile's first panel, panels `pstride` elements
//   apart; y with row stride ldy; cols: valid columns of the tile (< 16V only at the end of W).
//   keep: nullptr, or where each rounded pair is also stored (bf16 pair panels, the same stride) for
//   the later row tiles of the group.
template <int R, int V>
inline void f16_dot_tile(const uint16_t* xh, int64_t ldx, const uint16_t* wp, int64_t pstride, int64_t k,
                         const float* bias, float* y, int64_t ldy, int64_t cols, uint16_t* keep = nullptr) {
  __m512 acc[R][V];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
  const int64_t full = k / 2;
  for (int64_t q = 0; q < full; ++q) {
    __m512bh w[V];
    for (int v = 0; v < V; ++v)
      _mm_prefetch(reinterpret_cast<const char*>(wp + v * pstride + q * 2 * kF16PanelCols) + kF16DotPrefetchBytes, _MM_HINT_T0);
    for (int v = 0; v < V; ++v) w[v] = f16_pair_to_bf16(wp + v * pstride + q * 2 * kF16PanelCols);
    if (keep)
      for (int v = 0; v < V; ++v) _mm512_store_si512(keep + v * pstride + q * 2 * kF16PanelCols, (__m512i)w[v]);
    for (int i = 0; i < R; ++i) {
      const __m512bh xb = pair_bcast(xh + i * ldx, q);
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], xb, w[v]);
    }
  }
  if (k % 2) {
    __m512bh w[V];
    for (int v = 0; v < V; ++v) w[v] = f16_pair_to_bf16(wp + v * pstride + full * 2 * kF16PanelCols);
    if (keep)
      for (int v = 0; v < V; ++v) _mm512_store_si512(keep + v * pstride + full * 2 * kF16PanelCols, (__m512i)w[v]);
    for (int i = 0; i < R; ++i) {
      const __m512bh xb = last_single_bcast(xh + i * ldx, k);
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], xb, w[v]);
    }
  }
  for (int v = 0; v < V; ++v) {
    const int64_t c = cols - 16 * v;  // > 0 for every v < V (the caller sizes V to the columns)
    const __mmask16 mask = c >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << c) - 1u);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + 16 * v) : _mm512_setzero_ps();
    for (int i = 0; i < R; ++i) _mm512_mask_storeu_ps(y + i * ldy + 16 * v, mask, bias ? _mm512_add_ps(acc[i][v], b) : acc[i][v]);
  }
}

// Rows [0, r) (1 ≤ r ≤ 6) of one tile of V f16 panels, the rounded pairs also stored at keep.
template <int V>
inline void f16_dot_first_tile(int64_t r, const uint16_t* xh, int64_t ldx, const uint16_t* wp, int64_t pstride,
                               int64_t k, const float* bias, float* y, int64_t ldy, int64_t cols, uint16_t* keep) {
  switch (r) {
    case 6: f16_dot_tile<6, V>(xh, ldx, wp, pstride, k, bias, y, ldy, cols, keep); break;
    case 5: f16_dot_tile<5, V>(xh, ldx, wp, pstride, k, bias, y, ldy, cols, keep); break;
    case 4: f16_dot_tile<4, V>(xh, ldx, wp, pstride, k, bias, y, ldy, cols, keep); break;
    case 3: f16_dot_tile<3, V>(xh, ldx, wp, pstride, k, bias, y, ldy, cols, keep); break;
    case 2: f16_dot_tile<2, V>(xh, ldx, wp, pstride, k, bias, y, ldy, cols, keep); break;
    default: f16_dot_tile<1, V>(xh, ldx, wp, pstride, k, bias, y, ldy, cols, keep); break;
  }
}

// Columns [n0, n1) (n0 a multiple of 16) for all rows; xh [m, k] = bf16(x); scratch:
// f16_bf16dot_scratch_bytes(k) bytes, 64-byte aligned (this thread's). m = 1: groups of 8 panels
// rounded in registers. m ≥ 2: groups of 4 panels, the first row tile keeping the rounded group in
// scratch for the others. Every path runs the same VDPBF16PS sequence per output, so m never
// changes a result.
inline void linear_cols_f16_panels_bf16dot(const uint16_t* xh, const LinearTask& t, int64_t n0, int64_t n1,
                                           uint16_t* scratch) {
  const auto* w = static_cast<const uint16_t*>(t.w);
  const int64_t pstride = f16_panel_elems(t.k);
  const int64_t group_cols = kF16PanelCols * (t.m == 1 ? kF16DotRowPanels : kF16DotTilePanels);
  for (int64_t c0 = n0; c0 < n1; c0 += group_cols) {
    const int64_t cols = n1 - c0 < group_cols ? n1 - c0 : group_cols;
    const int64_t panels = (cols + kF16PanelCols - 1) / kF16PanelCols;
    const uint16_t* wp = w + (c0 / kF16PanelCols) * pstride;
    const float* bias = t.bias ? t.bias + c0 : nullptr;
    if (t.m == 1) {
      float* y = t.y + c0;
      switch (panels) {
        case 8: f16_dot_tile<1, 8>(xh, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        case 7: f16_dot_tile<1, 7>(xh, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        case 6: f16_dot_tile<1, 6>(xh, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        case 5: f16_dot_tile<1, 5>(xh, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        case 4: f16_dot_tile<1, 4>(xh, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        case 3: f16_dot_tile<1, 3>(xh, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        case 2: f16_dot_tile<1, 2>(xh, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        default: f16_dot_tile<1, 1>(xh, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
      }
      continue;
    }
    // The first row tile streams the f16 group from memory, rounds it and keeps the pairs in
    // scratch; the further row tiles run the bf16-dot kernel on scratch.
    const int64_t r0 = t.m < kPanelRows ? t.m : kPanelRows;
    switch (panels) {
      case 4: f16_dot_first_tile<4>(r0, xh, t.k, wp, pstride, t.k, bias, t.y + c0, t.n_out, cols, scratch); break;
      case 3: f16_dot_first_tile<3>(r0, xh, t.k, wp, pstride, t.k, bias, t.y + c0, t.n_out, cols, scratch); break;
      case 2: f16_dot_first_tile<2>(r0, xh, t.k, wp, pstride, t.k, bias, t.y + c0, t.n_out, cols, scratch); break;
      default: f16_dot_first_tile<1>(r0, xh, t.k, wp, pstride, t.k, bias, t.y + c0, t.n_out, cols, scratch); break;
    }
    for (int64_t i = r0; i < t.m; i += kPanelRows) {
      const int64_t r = t.m - i < kPanelRows ? t.m - i : kPanelRows;
      const uint16_t* x = xh + i * t.k;
      float* y = t.y + i * t.n_out + c0;
      switch (panels) {
        case 4: panel_tile_rows<4, false>(r, x, nullptr, t.k, scratch, pstride, t.k, bias, y, t.n_out, cols); break;
        case 3: panel_tile_rows<3, false>(r, x, nullptr, t.k, scratch, pstride, t.k, bias, y, t.n_out, cols); break;
        case 2: panel_tile_rows<2, false>(r, x, nullptr, t.k, scratch, pstride, t.k, bias, y, t.n_out, cols); break;
        default: panel_tile_rows<1, false>(r, x, nullptr, t.k, scratch, pstride, t.k, bias, y, t.n_out, cols); break;
      }
    }
  }
}
#endif

}  // namespace pypto::cpu::PYPTO_ISA_NS
