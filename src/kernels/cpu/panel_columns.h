#pragma once
// The column driver shared by the column-panel linears (linear_f16_panels_impl.h,
// linear_bf16_panels_f32_impl.h), in the ISA namespace (include after simd.h): columns [n0, n1)
// of y (n0 a multiple of the 16-column panel) for all rows, in groups of whole panels — at m = 1
// RowPanels panels per tile, else TilePanels panels, each group passed by every TileRows-row tile
// of x in turn (up to Tile::kOnePassRows rows, one tile of all of them) — with the last tile of
// each kind cut to the rows and panels left by panel_tile_fit; and the tiles' common epilogue
// (store_panel_tile). Tile::run<R, V>(x, ldx, wp,
// pstride, k, bias, y, ldy, cols) computes one R-row × V-panel tile in the kernel's own order of
// summation, so the driver changes no bits.
#include <algorithm>
#include <cstdint>

#include <immintrin.h>

#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::PYPTO_ISA_NS {

constexpr int64_t kColumnPanelWidth = 16;  // outputs per panel (kPanelCols, kF16PanelCols)

// A tile's outputs: total[i][u] (+ bias) to y[i, kLanes·u ...] for rows i < R and the first
// `cols` columns (u past them skipped: the caller sizes the tile to the columns, so a vector
// with none left can only be the last panel's second half on AVX2).
template <int R, int U>
inline void store_panel_tile(const vf (&total)[R][U], const float* bias, float* y, int64_t ldy, int64_t cols) {
  for (int u = 0; u < U; ++u) {
    const int64_t c = cols - kLanes * u;
    if (c <= 0) break;
    const int n = c >= kLanes ? kLanes : int(c);
    const vf b = bias ? (n == kLanes ? vload(bias + kLanes * u) : vload_n(bias + kLanes * u, n)) : vzero();
    for (int i = 0; i < R; ++i) {
      const vf out = bias ? vadd(total[i][u], b) : total[i][u];
      if (n == kLanes)
        vstore(y + i * ldy + kLanes * u, out);
      else
        vstore_n(y + i * ldy + kLanes * u, out, n);
    }
  }
}

// The next group of panels a tile prefetches into L2 while it computes (see linear_cols_panels):
// the tile calls line(l) as it reads line l (bytes [64 l, 64 l + 64)) of its panels, which
// fetches line l of each panel of the next group. Default: nothing to fetch.
struct PanelPrefetch {
  const char* base = nullptr;  // the next group's first panel
  int64_t pstride_bytes = 0;   // bytes from one panel to the next
  int panels = 0;              // panels in the next group
  __attribute__((always_inline)) void line(int64_t l) const {
    for (int v = 0; v < panels; ++v) _mm_prefetch(base + v * pstride_bytes + l * 64, _MM_HINT_T1);
  }
};

// Whether the tiles of this ISA's build prefetch the next group when one tile passes each group
// (m <= Tile::kOnePassRows) or, at m = 4q + 1 past that, the first of the full tiles passing it. Measured on AVX2 only; the AVX-512 builds (f16 panels) keep the hardware's
// prefetching until a run there shows a gain.
#if defined(__AVX512F__)
constexpr bool kPanelPrefetch = false;
#else
constexpr bool kPanelPrefetch = true;
#endif

// The R x V instantiation of Tile that fits r <= R rows and p <= V panels exactly.
template <class Tile, int R, int V>
inline void panel_tile_fit(int64_t r, int64_t p, const float* x, int64_t ldx, const uint16_t* wp, int64_t pstride,
                           int64_t k, const float* bias, float* y, int64_t ldy, int64_t cols,
                           const PanelPrefetch& pf = {}) {
  if constexpr (R > 1) {
    if (r < R) return panel_tile_fit<Tile, R - 1, V>(r, p, x, ldx, wp, pstride, k, bias, y, ldy, cols, pf);
  }
  if constexpr (V > 1) {
    if (p < V) return panel_tile_fit<Tile, R, V - 1>(r, p, x, ldx, wp, pstride, k, bias, y, ldy, cols, pf);
  }
  Tile::template run<R, V>(x, ldx, wp, pstride, k, bias, y, ldy, cols, pf);
}

// pstride: uint16 elements of one panel (t.w holds the panels in order).
template <class Tile, int TileRows, int TilePanels, int RowPanels>
inline void linear_cols_panels(const LinearTask& t, int64_t n0, int64_t n1, int64_t pstride) {
  const auto* w = static_cast<const uint16_t*>(t.w);
  const bool one_row = t.m == 1;
  // m <= Tile::kOnePassRows: one tile of all m rows (bf16: up to 8, past the 4 rows the registers
  // hold; the extra accumulators spill to L1) passes each group, so every panel is read and
  // widened once and the next group's prefetch runs beside the arithmetic. Against 4-row tiles and
  // a leftover tile passing the group in turn (AMD EPYC Zen 3, bf16, 2 threads,
  // bench/kernels/panel_ab.sh): 1.29-1.49x at m = 5, 1.26-1.49x at m = 6, 1.22-1.33x at m = 7, 8.
  // Past that, one row left over after whole TileRows-row tiles (m = 9, 13, ...;
  // Tile::kRowRemainder) goes as a one-row tile over RowPanels panels, as m = 1 does, instead of a
  // 1-row tile over TilePanels panels. A row has 2 FMA chains per 16-column panel (one per 8
  // outputs): 1 × 1 panel waits on the FMA latency with 2 chains in flight, 1 × 4 panels keeps 8.
  // The groups then hold RowPanels panels, which the full tiles pass one TilePanels group at a
  // time (1.10-1.13x at m = 5, 9, 13 when m = 5 went so; two or three rows left as that many
  // one-row tiles 1.03x and 0.89x, so those stay one tile). Every output's sum runs in its fixed
  // order in any tile: no value changes.
  constexpr int kOnePassRows = Tile::kOnePassRows;
  static_assert(kOnePassRows >= TileRows, "one tile passes a group at least up to TileRows rows");
  const bool one_pass = t.m <= kOnePassRows;
  const bool row_remainder = !one_pass && Tile::kRowRemainder && t.m % TileRows == 1;
  const int64_t group_cols = kColumnPanelWidth * (one_row || row_remainder ? RowPanels : TilePanels);
  // The panels of the group after c0 (a prefetch's extent; 0 past the end).
  auto next_panels = [&](int64_t c0) -> int64_t {
    const int64_t next = std::min(n1, c0 + 2 * group_cols) - (c0 + group_cols);
    return next > 0 ? (next + kColumnPanelWidth - 1) / kColumnPanelWidth : 0;
  };
  auto prefetch = [&](const uint16_t* panel, int64_t count) {
    PanelPrefetch pf;
    if (kPanelPrefetch && count > 0) {
      pf.base = reinterpret_cast<const char*>(panel);
      pf.pstride_bytes = pstride * static_cast<int64_t>(sizeof(uint16_t));
      pf.panels = static_cast<int>(count);
    }
    return pf;
  };
  for (int64_t c0 = n0; c0 < n1; c0 += group_cols) {
    const int64_t cols = n1 - c0 < group_cols ? n1 - c0 : group_cols;
    const int64_t panels = (cols + kColumnPanelWidth - 1) / kColumnPanelWidth;
    const uint16_t* wp = w + (c0 / kColumnPanelWidth) * pstride;
    const float* bias = t.bias ? t.bias + c0 : nullptr;
    if (one_row) {
      panel_tile_fit<Tile, 1, RowPanels>(1, panels, t.x, t.k, wp, pstride, t.k, bias, t.y + c0, t.n_out, cols);
      continue;
    }
    if (row_remainder) {
      const int64_t full = t.m / TileRows * TileRows;
      // The first full tile over panels [p, p + TilePanels) prefetches the same panels of the next
      // group (m = 9: 1.16x, panel_ab.sh as above).
      const int64_t ahead = next_panels(c0);
      for (int64_t p = 0; p < panels; p += TilePanels) {
        const int64_t pc = cols - p * kColumnPanelWidth < TilePanels * kColumnPanelWidth
                               ? cols - p * kColumnPanelWidth
                               : TilePanels * kColumnPanelWidth;
        const PanelPrefetch pf = prefetch(wp + (panels + p) * pstride, std::min<int64_t>(TilePanels, ahead - p));
        for (int64_t i = 0; i < full; i += TileRows)
          panel_tile_fit<Tile, TileRows, TilePanels>(TileRows, panels - p, t.x + i * t.k, t.k, wp + p * pstride,
                                                     pstride, t.k, bias ? bias + p * kColumnPanelWidth : nullptr,
                                                     t.y + i * t.n_out + c0 + p * kColumnPanelWidth, t.n_out, pc,
                                                     i == 0 ? pf : PanelPrefetch{});
      }
      panel_tile_fit<Tile, 1, RowPanels>(1, panels, t.x + full * t.k, t.k, wp, pstride, t.k, bias,
                                         t.y + full * t.n_out + c0, t.n_out, cols);
      continue;
    }
    // One row tile per group (m <= kOnePassRows: small batches, verify steps): it reads the
    // group's panels from memory with the arithmetic waiting on them, and the memory idles while
    // it computes. So the tile prefetches the next group into L2 as it goes, one line per line it
    // reads: the transfer runs beside the arithmetic (bf16 panels on AMD EPYC Zen 3, 2 threads:
    // 1.18-1.28x at m = 2..4; spread over two tiles of one group 0.91-1.11x at m = 5..8, which
    // one tile of all the rows now passes instead; docs/status.md). A hint: no value changes.
    if (one_pass) {
      panel_tile_fit<Tile, kOnePassRows, TilePanels>(t.m, panels, t.x, t.k, wp, pstride, t.k, bias, t.y + c0,
                                                     t.n_out, cols, prefetch(wp + panels * pstride, next_panels(c0)));
      continue;
    }
    for (int64_t i = 0; i < t.m; i += TileRows) {
      const int64_t r = t.m - i < TileRows ? t.m - i : TileRows;
      panel_tile_fit<Tile, TileRows, TilePanels>(r, panels, t.x + i * t.k, t.k, wp, pstride, t.k, bias,
                                                 t.y + i * t.n_out + c0, t.n_out, cols);
    }
  }
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
