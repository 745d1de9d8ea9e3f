#pragma once
// y[m, n_out] = x[m, k] · W[n_out, k]ᵀ (+ bias) for f16 weights in column panels
// (kernels/cpu/f16_panels.h), AVX-512 only, x in f32 at every matmul precision.
//
// Register tile: R rows of x by V panels (16 outputs each), R · V accumulators. Per k step j:
// V loads of 16 f16 weights (32 bytes) widened exactly by VCVTPH2PS, and for each row one
// broadcast of x[i, j]; R · V FMAs. No horizontal sums, no widening into scratch, and each
// widened weight vector serves all R rows. Tiles: 6 rows × 4 panels (24 accumulators) when
// m >= 2, so a batched decode step's 16 lm_head rows pass a 64-column group (4 panels × k · 32
// bytes: 256 KiB at k = 2048, kept in L2) three times; 1 row × 8 panels at m = 1 (8 independent
// FMA chains cover the FMA latency; memory-bound: each weight byte is read once).
//
// Order, the same for every output whatever m, the tile or the thread's columns: for each block
// b of kF16Block k steps (fixed boundaries 0, 256, ...): acc = 0; acc = fma(x[i, j], w[n, j], acc)
// for j in the block, increasing (one f32 lane); total = acc (b = 0) or total + acc; y = total
// (+ bias[n]). The FMA rounds each exact product-sum once, so the bound is (min(k, 256) + k / 256)
// · 2^-24 · Σ|x w| instead of k · 2^-24 for one running sum (the blocks cost ~24 adds per 256 k
// steps of a tile, the totals live in L1). Batch-invariant.
#include <cstdint>

#include "kernels/cpu/f16_panels.h"
#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::PYPTO_ISA_NS {

#if defined(__AVX512F__)
constexpr int kF16TileRows = 6;    // R at m >= 2
constexpr int kF16TilePanels = 4;  // V at m >= 2 (64 columns)
constexpr int kF16RowPanels = 8;   // V at m = 1 (128 columns)
constexpr int64_t kF16Block = 256; // k steps summed from zero before joining the output's total

// y[i, 16v + c] for rows i < R and panels v < V of one tile.
//   x [R, k] with row stride ldx; wp: the tile's first panel, panels `pstride` elements apart;
//   y with row stride ldy; cols: valid columns of the tile (< 16V only at the end of W).
template <int R, int V>
inline void f16_panel_tile(const float* x, int64_t ldx, const uint16_t* wp, int64_t pstride, int64_t k,
                           const float* bias, float* y, int64_t ldy, int64_t cols) {
  __m512 acc[R][V], total[R][V];
  for (int i = 0; i < R; ++i)
    for (int v = 0; v < V; ++v) total[i][v] = _mm512_setzero_ps();  // k = 0
  for (int64_t j0 = 0; j0 < k; j0 += kF16Block) {
    const int64_t j1 = k - j0 < kF16Block ? k : j0 + kF16Block;
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < V; ++v) acc[i][v] = _mm512_setzero_ps();
    for (int64_t j = j0; j < j1; ++j) {
      __m512 w[V];
      for (int v = 0; v < V; ++v)
        w[v] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(wp + v * pstride + j * kF16PanelCols)));
      for (int i = 0; i < R; ++i) {
        const __m512 xb = _mm512_set1_ps(x[i * ldx + j]);
        for (int v = 0; v < V; ++v) acc[i][v] = _mm512_fmadd_ps(xb, w[v], acc[i][v]);
      }
    }
    for (int i = 0; i < R; ++i)
      for (int v = 0; v < V; ++v) total[i][v] = j0 == 0 ? acc[i][v] : _mm512_add_ps(total[i][v], acc[i][v]);
  }
  for (int v = 0; v < V; ++v) {
    const int64_t c = cols - 16 * v;  // > 0 for every v < V (the caller sizes V to the columns)
    const __mmask16 mask = c >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << c) - 1u);
    const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias + 16 * v) : _mm512_setzero_ps();
    for (int i = 0; i < R; ++i) {
      const __m512 out = bias ? _mm512_add_ps(total[i][v], b) : total[i][v];
      _mm512_mask_storeu_ps(y + i * ldy + 16 * v, mask, out);
    }
  }
}

template <int V>
inline void f16_panel_tile_rows(int64_t r, const float* x, int64_t ldx, const uint16_t* wp, int64_t pstride,
                                int64_t k, const float* bias, float* y, int64_t ldy, int64_t cols) {
  static_assert(kF16TileRows == 6, "f16_panel_tile_rows handles 1..6 rows");
  switch (r) {
    case 6: f16_panel_tile<6, V>(x, ldx, wp, pstride, k, bias, y, ldy, cols); break;
    case 5: f16_panel_tile<5, V>(x, ldx, wp, pstride, k, bias, y, ldy, cols); break;
    case 4: f16_panel_tile<4, V>(x, ldx, wp, pstride, k, bias, y, ldy, cols); break;
    case 3: f16_panel_tile<3, V>(x, ldx, wp, pstride, k, bias, y, ldy, cols); break;
    case 2: f16_panel_tile<2, V>(x, ldx, wp, pstride, k, bias, y, ldy, cols); break;
    default: f16_panel_tile<1, V>(x, ldx, wp, pstride, k, bias, y, ldy, cols); break;
  }
}

// One row, a group of up to kF16RowPanels panels.
inline void f16_panel_row_group(const LinearTask& t, const uint16_t* wp, int64_t pstride, int64_t c0, int64_t cols) {
  const float* bias = t.bias ? t.bias + c0 : nullptr;
  float* y = t.y + c0;
  switch ((cols + kF16PanelCols - 1) / kF16PanelCols) {
    case 8: f16_panel_tile<1, 8>(t.x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
    case 7: f16_panel_tile<1, 7>(t.x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
    case 6: f16_panel_tile<1, 6>(t.x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
    case 5: f16_panel_tile<1, 5>(t.x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
    case 4: f16_panel_tile<1, 4>(t.x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
    case 3: f16_panel_tile<1, 3>(t.x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
    case 2: f16_panel_tile<1, 2>(t.x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
    default: f16_panel_tile<1, 1>(t.x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
  }
}

// Columns [n0, n1) (n0 a multiple of 16) for all rows, W in f16 panels (t.w). m = 1: groups of
// 8 panels; else groups of 4 panels, and for each group every 6-row tile of x in turn.
inline void linear_cols_f16_panels(const LinearTask& t, int64_t n0, int64_t n1) {
  const auto* w = static_cast<const uint16_t*>(t.w);
  const int64_t pstride = f16_panel_elems(t.k);
  if (t.m == 1) {
    const int64_t group_cols = kF16PanelCols * kF16RowPanels;
    for (int64_t c0 = n0; c0 < n1; c0 += group_cols)
      f16_panel_row_group(t, w + (c0 / kF16PanelCols) * pstride, pstride, c0, n1 - c0 < group_cols ? n1 - c0 : group_cols);
    return;
  }
  const int64_t group_cols = kF16PanelCols * kF16TilePanels;
  for (int64_t c0 = n0; c0 < n1; c0 += group_cols) {
    const int64_t cols = n1 - c0 < group_cols ? n1 - c0 : group_cols;
    const int64_t panels = (cols + kF16PanelCols - 1) / kF16PanelCols;
    const uint16_t* wp = w + (c0 / kF16PanelCols) * pstride;
    const float* bias = t.bias ? t.bias + c0 : nullptr;
    for (int64_t i = 0; i < t.m; i += kF16TileRows) {
      const int64_t r = t.m - i < kF16TileRows ? t.m - i : kF16TileRows;
      const float* x = t.x + i * t.k;
      float* y = t.y + i * t.n_out + c0;
      switch (panels) {
        case 4: f16_panel_tile_rows<4>(r, x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        case 3: f16_panel_tile_rows<3>(r, x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        case 2: f16_panel_tile_rows<2>(r, x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
        default: f16_panel_tile_rows<1>(r, x, t.k, wp, pstride, t.k, bias, y, t.n_out, cols); break;
      }
    }
  }
}
#endif

}  // namespace pypto::cpu::PYPTO_ISA_NS
