#pragma once
// y[m, n_out] = x[m, k] · W[n_out, k]ᵀ (+ bias) for bf16 weights in pair panels
// (kernels/cpu/bf16_panels.h) with x in f32 and f32 FMA: the bf16 linear of an ISA without a bf16
// dot product (AVX2), at every matmul precision. Compiled for AVX2 (linear_avx2.cpp).
//
// Why panels: on plain rows a GEMV puts the k of one output in the lanes and ends each output with
// a horizontal sum; at Qwen3's k = 1024 (the 0.6B's qkv, gate_up, lm_head) those rows measured
// 55-77 % of the read bandwidth on two AVX2 cores (docs/status.md). A pair panel holds 16 outputs'
// weights for k = 2q, 2q + 1 in one 64-byte run, so accumulators hold outputs: no horizontal sums,
// each panel a contiguous stream, and each widened weight vector serves every row of the tile.
//
// Widening, exact: lane c of a 32-bit run holds W[c][2q] in its low half and W[c][2q + 1] in its
// high half; even = lane << 16, odd = lane & 0xffff0000 (simd.h load_bf16_pairs). Per pair and
// row: two broadcasts of x (x[2q], x[2q + 1]) and two FMAs per accumulator.
//
// Register tile (AVX2, 16 ymm): R rows of x by V panels, R · 2V accumulators. m >= 9: 4 rows × 1
// panel: the panel's two pair runs widened once per pair (4 ymm), then each row's two broadcasts
// feed 4 FMAs (8 accumulators); the 16-column panel (64 KiB at k = 2048) is passed once per 4
// rows from L2. 6 rows with one run widened at a time measured 1.0-1.55x slower at m = 4 and 16
// (docs/status.md). m = 2..8 (batched decode, speculative verify steps): one tile of all m rows ×
// 1 panel (kOnePassRows; past 4 rows its accumulators spill to L1), so each panel is read from
// memory and widened once, with the next panel prefetched beside the arithmetic (panel_columns.h).
// m = 1: 1 row × 4 panels (8 independent chains of FMAs, enough to cover the FMA latency;
// memory-bound, each weight byte read once), and so a single row left after whole 4-row tiles.
//
// Order, the same for every output whatever m, the tile or the thread's columns: for each block b
// of kBf16F32Block k steps (fixed boundaries 0, 256, ...): acc = 0; acc = fma(x[i, j], w[n, j],
// acc) for j in the block, increasing (j = 2q, then 2q + 1; one f32 lane); total = acc (b = 0) or
// total + acc; y = total (+ bias[n]). The products are exact, so the bound is (min(k, 256) + k /
// 256) · 2^-24 · Σ|x w|, as for the f16 panels (linear_f16_panels_impl.h). Batch-invariant.
// The pad past k (odd k, pairs up to a multiple of 16) is never read: an odd k ends with an even
// step only.
#include <cstdint>

#include "kernels/cpu/bf16_panels.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/panel_columns.h"

namespace pypto::cpu::PYPTO_ISA_NS {

static_assert(kPanelCols == kColumnPanelWidth, "panel_columns.h drives 16-column panels");

constexpr int kBf16F32PanelVecs = kPanelCols / kLanes;  // vectors per panel (AVX2: 2)
constexpr int kBf16F32TileRows = 4;                     // R at m >= 2
constexpr int kBf16F32TilePanels = 1;                  // V at m >= 2
constexpr int kBf16F32RowPanels = 8 / kBf16F32PanelVecs;  // V at m = 1: 8 accumulators
constexpr int64_t kBf16F32Block = 256;  // k steps summed from zero before joining the output's total

// y[i, 16v + c] for rows i < R and panels v < V of one tile.
//   x [R, k] with row stride ldx; wp: the tile's first panel, panels `pstride` elements apart;
//   y with row stride ldy; cols: valid columns of the tile (< 16V only at the end of W);
//   Prefetch: pf holds the next group of panels to fetch (panel_columns.h; R > 1 only), a template
//   argument so that the compute-bound tiles of larger m carry no test in their loop.
template <int R, int V, bool Prefetch>
inline void bf16_f32_panel_tile(const float* x, int64_t ldx, const uint16_t* wp, int64_t pstride, int64_t k,
                                const float* bias, float* y, int64_t ldy, int64_t cols, const PanelPrefetch& pf) {
  constexpr int U = V * kBf16F32PanelVecs;  // accumulators per row; vector u: panel u / kBf16F32PanelVecs
  constexpr int64_t kPairElems = kPanelCols * 2;  // uint16 of one pair step of a panel
  // Vector u's run of pair q: panel u / kBf16F32PanelVecs, its (u % kBf16F32PanelVecs)-th kLanes columns.
  auto run = [&](int u, int64_t q) __attribute__((always_inline)) {
    return wp + (u / kBf16F32PanelVecs) * pstride + q * kPairElems + (u % kBf16F32PanelVecs) * 2 * kLanes;
  };
  vf acc[R][U], total[R][U];
  for (int i = 0; i < R; ++i)
    for (int u = 0; u < U; ++u) total[i][u] = vzero();  // k = 0
  for (int64_t j0 = 0; j0 < k; j0 += kBf16F32Block) {
    const int64_t j1 = k - j0 < kBf16F32Block ? k : j0 + kBf16F32Block;  // j0 even: blocks hold whole pairs
    for (int i = 0; i < R; ++i)
      for (int u = 0; u < U; ++u) acc[i][u] = vzero();
    int64_t j = j0;
    for (; j + 1 < j1; j += 2) {
      const int64_t q = j / 2;
      if constexpr (R == 1) {  // the row's two broadcasts stay in registers; one pair run at a time
        for (int u = 0; u < U; ++u) {
          vf we, wo;
          load_bf16_pairs(run(u, q), we, wo);
          acc[0][u] = vfma(vset1(x[j]), we, acc[0][u]);
          acc[0][u] = vfma(vset1(x[j + 1]), wo, acc[0][u]);
        }
      } else {  // the tile's pair runs widened once, then each row's two broadcasts feed 2U FMAs
        vf we[U], wo[U];
        if constexpr (Prefetch) pf.line(q);  // a pair step of a panel is one 64-byte line
        for (int u = 0; u < U; ++u)
          load_bf16_pairs(run(u, q), we[u], wo[u]);
        for (int i = 0; i < R; ++i) {
          const vf xe = vset1(x[i * ldx + j]), xo = vset1(x[i * ldx + j + 1]);
          for (int u = 0; u < U; ++u) {
            acc[i][u] = vfma(xe, we[u], acc[i][u]);
            acc[i][u] = vfma(xo, wo[u], acc[i][u]);
          }
        }
      }
    }
    if (j < j1) {  // odd k: the last step is the even half of a pair (the odd half is pad)
      const int64_t q = j / 2;
      for (int u = 0; u < U; ++u) {
        vf we, wo;
        load_bf16_pairs(run(u, q), we, wo);
        for (int i = 0; i < R; ++i) acc[i][u] = vfma(vset1(x[i * ldx + j]), we, acc[i][u]);
      }
    }
    for (int i = 0; i < R; ++i)
      for (int u = 0; u < U; ++u) total[i][u] = j0 == 0 ? acc[i][u] : vadd(total[i][u], acc[i][u]);
  }
  store_panel_tile<R, U>(total, bias, y, ldy, cols);
}

struct Bf16F32PanelTile {
  static constexpr bool kRowRemainder = true;  // a row past whole 4-row tiles as 1 × 4 panels
  static constexpr int kOnePassRows = 8;       // m <= 8: one tile of all the rows per panel
  template <int R, int V>
  static void run(const float* x, int64_t ldx, const uint16_t* wp, int64_t pstride, int64_t k, const float* bias,
                  float* y, int64_t ldy, int64_t cols, const PanelPrefetch& pf) {
    if constexpr (R > 1)
      if (pf.panels > 0) return bf16_f32_panel_tile<R, V, true>(x, ldx, wp, pstride, k, bias, y, ldy, cols, pf);
    bf16_f32_panel_tile<R, V, false>(x, ldx, wp, pstride, k, bias, y, ldy, cols, pf);
  }
};

// Columns [n0, n1) (n0 a multiple of 16) for all rows, W in pair panels (t.w): panel_columns.h's
// driver with this kernel's tiles.
inline void linear_cols_bf16_panels_f32(const LinearTask& t, int64_t n0, int64_t n1) {
  linear_cols_panels<Bf16F32PanelTile, kBf16F32TileRows, kBf16F32TilePanels, kBf16F32RowPanels>(t, n0, n1,
                                                                                                bf16_panel_elems(t.k));
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
