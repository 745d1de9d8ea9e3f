#pragma once
// y[m, n_out] = x[m, k] · W[n_out, k]ᵀ (+ bias) for f16 weights in column panels
// (kernels/cpu/f16_panels.h), x in f32 at every matmul precision. Written once over simd.h's
// vectors and compiled for AVX-512 (one 16-lane vector per panel) and AVX2 (two 8-lane vectors).
//
// Register tile: R rows of x by V panels (16 outputs each), R · V · (16 / kLanes) accumulators.
// Per k step j: V panels' 16 f16 weights (32 bytes) widened exactly by VCVTPH2PS, and for each
// row one broadcast of x[i, j]; R · 16V / kLanes FMAs. No horizontal sums, no widening into
// scratch, and each widened weight vector serves all R rows. Tiles at m >= 2: AVX-512 6 rows × 4
// panels (24 zmm accumulators), so a batched decode step's 16 lm_head rows pass a 64-column group
// (256 KiB at k = 2048, kept in L2) three times; AVX2 6 rows × 1 panel (12 of its 16 ymm, plus
// two weight vectors and the broadcast), the 16-column panel (64 KiB at k = 2048) passed three
// times. At m = 1: 1 row × 8 panels (AVX-512) or × 4 panels (AVX2): 8 independent FMA chains cover
// the FMA latency; memory-bound, each weight byte is read once.
//
// Order, the same for every output whatever m, the tile, the thread's columns or the ISA: for
// each block b of kF16Block k steps (fixed boundaries 0, 256, ...): acc = 0; acc = fma(x[i, j],
// w[n, j], acc) for j in the block, increasing (one f32 lane); total = acc (b = 0) or total + acc;
// y = total (+ bias[n]). So AVX2 and AVX-512 give the same bits. The FMA rounds each exact
// product-sum once, so the bound is (min(k, 256) + k / 256) · 2^-24 · Σ|x w| instead of k · 2^-24
// for one running sum (the blocks cost ~24 adds per 256 k steps of a tile, the totals live in
// L1). Batch-invariant.
#include <cstdint>

#include "kernels/cpu/f16_panels.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/panel_columns.h"

namespace pypto::cpu::PYPTO_ISA_NS {

static_assert(kF16PanelCols == kColumnPanelWidth, "panel_columns.h drives 16-column panels");

constexpr int kF16PanelVecs = kF16PanelCols / kLanes;  // vectors per panel: 1 (AVX-512), 2 (AVX2)
constexpr int kF16TileRows = 6;                        // R at m >= 2
#if defined(__AVX512F__)
constexpr int kF16TilePanels = 4;  // V at m >= 2 (64 columns)
constexpr int kF16RowPanels = 8;   // V at m = 1 (128 columns)
#else
constexpr int kF16TilePanels = 1;  // V at m >= 2 (16 columns)
constexpr int kF16RowPanels = 4;   // V at m = 1 (64 columns)
#endif
constexpr int64_t kF16Block = 256;  // k steps summed from zero before joining the output's total

// y[i, 16v + c] for rows i < R and panels v < V of one tile.
//   x [R, k] with row stride ldx; wp: the tile's first panel, panels `pstride` elements apart;
//   y with row stride ldy; cols: valid columns of the tile (< 16V only at the end of W).
template <int R, int V>
inline void f16_panel_tile(const float* x, int64_t ldx, const uint16_t* wp, int64_t pstride, int64_t k,
                           const float* bias, float* y, int64_t ldy, int64_t cols) {
  constexpr int U = V * kF16PanelVecs;  // accumulators per row; vector u: panel u / kF16PanelVecs
  vf acc[R][U], total[R][U];
  for (int i = 0; i < R; ++i)
    for (int u = 0; u < U; ++u) total[i][u] = vzero();  // k = 0
  for (int64_t j0 = 0; j0 < k; j0 += kF16Block) {
    const int64_t j1 = k - j0 < kF16Block ? k : j0 + kF16Block;
    for (int i = 0; i < R; ++i)
      for (int u = 0; u < U; ++u) acc[i][u] = vzero();
    for (int64_t j = j0; j < j1; ++j) {
      vf w[U];
      for (int u = 0; u < U; ++u)
        w[u] = load_f16(wp + (u / kF16PanelVecs) * pstride + j * kF16PanelCols + (u % kF16PanelVecs) * kLanes);
      for (int i = 0; i < R; ++i) {
        const vf xb = vset1(x[i * ldx + j]);
        for (int u = 0; u < U; ++u) acc[i][u] = vfma(xb, w[u], acc[i][u]);
      }
    }
    for (int i = 0; i < R; ++i)
      for (int u = 0; u < U; ++u) total[i][u] = j0 == 0 ? acc[i][u] : vadd(total[i][u], acc[i][u]);
  }
  store_panel_tile<R, U>(total, bias, y, ldy, cols);
}

struct F16PanelTile {
  // A row past whole tiles stays a 1-row tile of TilePanels (panel_columns.h): not measured for f16.
  static constexpr bool kRowRemainder = false;
  static constexpr int kOnePassRows = kF16TileRows;  // one pass of up to 8 rows: 0.94-1.00x on AVX2
  template <int R, int V>
  static void run(const float* x, int64_t ldx, const uint16_t* wp, int64_t pstride, int64_t k, const float* bias,
                  float* y, int64_t ldy, int64_t cols, const PanelPrefetch&) {
    // No prefetch of the next group: measured no gain for f16 panels at m = 4 and 8 on AVX2.
    f16_panel_tile<R, V>(x, ldx, wp, pstride, k, bias, y, ldy, cols);
  }
};

// Columns [n0, n1) (n0 a multiple of 16) for all rows, W in f16 panels (t.w): panel_columns.h's
// driver with this kernel's tiles.
inline void linear_cols_f16_panels(const LinearTask& t, int64_t n0, int64_t n1) {
  linear_cols_panels<F16PanelTile, kF16TileRows, kF16TilePanels, kF16RowPanels>(t, n0, n1, f16_panel_elems(t.k));
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
