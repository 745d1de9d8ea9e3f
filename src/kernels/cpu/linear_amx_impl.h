#pragma once
// linear on AMX-BF16 tiles (TDPBF16PS), bf16 weights in pair panels (kernels/cpu/bf16_panels.h).
// One TDPBF16PS multiplies a 16 × 32 bf16 A tile (16 rows of x, 16 pairs of k) by a 16-pair × 16
// column B tile (exactly one 1 KiB run of a panel) into 16 × 16 f32 accumulators: 8,192
// multiply-adds per instruction, ~16× the AVX-512 BF16 dot product's rate.
//
// x arrives as `parts` bf16 terms (AmxActivations): medium one (x rounded to bf16), high two
// (x ≈ hi + lo, ~16 bits), each zero-padded to [ceil(m / 16) · 16, ceil(k / 32) · 32], so every
// tile is full and no tile configuration depends on m, k or n.
//
// Register blocking: up to 2 row tiles × 2 column tiles of C (tmm0-3), A in tmm4-5, B in tmm6-7.
// Per 32 k: load B (2 tiles), then for each part load A (2 tiles) and issue 4 products.
//
// Order (batch invariance): an output's accumulator starts at zero and takes, for k block
// s = 0, 1, ... (32 k each), the part-0 tile product, then the part-1 product, ...; then bias is
// added. A tile product's result for one element depends only on its row of A and column of B
// (which rows share the tile never matters), so a row gives the same bits alone, in a batch of
// 16 or 512, in chunks and through the prefix cache. The products are not the AVX-512 BF16 dot
// product's (TDPBF16PS rounds its pair sums differently: measured on Xeon, about half of the
// results differ in the last bit from a VDPBF16PS chain), so a backend that uses AMX uses it for
// every m, including one-row decode steps, where it streams W as fast as the dot-product kernel.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/amx_tile.h"
#include "kernels/cpu/bf16_panels.h"
#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::amx {

// Rows of x swept per pass over a thread's columns (the GEMM path).
constexpr int64_t kRowPass = 256;
// Columns of y whose accumulators the GEMM path keeps between k blocks (kernels' f32 buffer of
// kRowPass × kGroupCols: 256 KiB per thread).
constexpr int64_t kGroupCols = 256;
constexpr int64_t kGroupLd = kGroupCols + 16;  // row stride of that buffer: not a power of two (cache sets)
// Software prefetch distance in B tiles (1 KiB each) per panel, used when x has at most
// kPrefetchRows rows (W read once from memory per call: decode steps).
constexpr int64_t kPrefetchTiles = 8;
constexpr int64_t kPrefetchRows = 32;

// Writes accumulator rows [0, rows) × columns [0, cols) (c with row stride ldc floats; + bias)
// to y (row stride ldy).
inline void store_rows(const float* c, int64_t ldc, int64_t rows, int64_t cols, const float* bias, float* y,
                       int64_t ldy) {
  const __mmask16 mask = cols >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1u);
  const __m512 b = bias ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  for (int64_t r = 0; r < rows; ++r) {
    __m512 v = _mm512_loadu_ps(c + ldc * r);
    if (bias) v = _mm512_add_ps(v, b);
    _mm512_mask_storeu_ps(y + r * ldy, mask, v);
  }
}

// C[RT × 16 rows, CT × 16 columns] for rows [i, i + 16 RT) of the padded x and panels p, p + 1.
template <int RT, int CT, int PARTS, bool PREFETCH>
inline void tile_block(const AmxActivations& x, int64_t i, const uint16_t* wp, int64_t pstride, const LinearTask& t,
                       int64_t c0, int64_t cols) {
  zero_acc_tiles<RT, CT>();
  const int64_t part_elems = x.m_pad * x.ldx;
  const int64_t ksteps = x.ldx / 32;
  constexpr int64_t kTileElems = kPanelTilePairs * kPanelCols * 2;  // one B tile: 512 bf16, 1 KiB
  for (int64_t s = 0; s < ksteps; ++s) {
    const uint16_t* b = wp + s * kTileElems;
    if constexpr (PREFETCH) {
      // W streams from memory when few rows share it (decode): fetch the B tiles kPrefetchTiles
      // steps ahead in each panel, 16 lines each, so the tile loads find them in L1/L2.
      const char* ahead = reinterpret_cast<const char*>(b + kPrefetchTiles * kTileElems);
      for (int l = 0; l < 16; ++l) _mm_prefetch(ahead + 64 * l, _MM_HINT_T1);
      if constexpr (CT == 2)
        for (int l = 0; l < 16; ++l) _mm_prefetch(ahead + 2 * pstride + 64 * l, _MM_HINT_T1);
    }
    _tile_loadd(6, b, kAmxTileBytes);
    if constexpr (CT == 2) _tile_loadd(7, b + pstride, kAmxTileBytes);
    for (int p = 0; p < PARTS; ++p) {
      const uint16_t* a = x.data + p * part_elems + ((i / 16) * ksteps + s) * kTileElems;
      _tile_loadd(4, a, kAmxTileBytes);
      if constexpr (RT == 2) _tile_loadd(5, a + ksteps * kTileElems, kAmxTileBytes);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (CT == 2) _tile_dpbf16ps(1, 4, 7);
      if constexpr (RT == 2) _tile_dpbf16ps(2, 5, 6);
      if constexpr (RT == 2 && CT == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  alignas(64) float c[4][16 * 16];
  store_acc_tiles<RT, CT>(c[0], 2 * 256, 256, kAmxTileBytes);
  for (int r = 0; r < RT; ++r) {
    const int64_t row0 = i + 16 * r;
    if (row0 >= t.m) break;
    const int64_t rows = t.m - row0 < 16 ? t.m - row0 : 16;
    for (int ct = 0; ct < CT; ++ct) {
      const int64_t col0 = c0 + 16 * ct;
      const int64_t n = cols - 16 * ct < 16 ? cols - 16 * ct : 16;
      store_rows(c[2 * r + ct], 16, rows, n, t.bias ? t.bias + col0 : nullptr, t.y + row0 * t.n_out + col0, t.n_out);
    }
  }
}

// The decode path (few rows, W from memory): for each pair of panels and each 32-row block, the
// whole k loop in registers, prefetching W ahead.
template <int PARTS>
inline void linear_cols_stream(const AmxActivations& x, const LinearTask& t, int64_t n0, int64_t n1) {
  const auto* w = static_cast<const uint16_t*>(t.w);
  const int64_t pstride = bf16_panel_elems(t.k);
  for (int64_t c0 = n0; c0 < n1; c0 += 32) {
    const int64_t cols = n1 - c0 < 32 ? n1 - c0 : 32;
    const uint16_t* wp = w + (c0 / kPanelCols) * pstride;
    for (int64_t i = 0; i < x.m_pad; i += 32) {
      const bool two_rows = i + 16 < x.m_pad;
      if (cols > 16) {
        if (two_rows) tile_block<2, 2, PARTS, true>(x, i, wp, pstride, t, c0, cols);
        else tile_block<1, 2, PARTS, true>(x, i, wp, pstride, t, c0, cols);
      } else {
        if (two_rows) tile_block<2, 1, PARTS, true>(x, i, wp, pstride, t, c0, cols);
        else tile_block<1, 1, PARTS, true>(x, i, wp, pstride, t, c0, cols);
      }
    }
  }
}

// k steps [s0, s1) (32 k each) of C[RT × 16 rows, CT × 16 columns] held in `cbuf` (row stride
// kGroupCols floats) between calls: loaded (or zeroed when s0 == 0), advanced, stored back. Reloading an f32
// accumulator is exact, so the k blocking never changes a result.
template <int RT, int CT, int PARTS>
inline void tile_kblock(const AmxActivations& x, int64_t i, const uint16_t* wp, int64_t pstride, int64_t s0,
                        int64_t s1, float* cbuf, float* y, int64_t ldy) {
  constexpr int64_t kTileElems = kPanelTilePairs * kPanelCols * 2;
  constexpr int64_t ldc = kGroupLd * sizeof(float);
  constexpr int64_t r16 = 16 * kGroupLd;  // the second row tile
  if (s0 == 0)
    zero_acc_tiles<RT, CT>();
  else
    load_acc_tiles<RT, CT>(cbuf, r16, 16, ldc);
  const int64_t part_elems = x.m_pad * x.ldx;
  const int64_t ksteps = x.ldx / 32;
  // Loads interleaved with the products: a tile register is reloaded only after the products
  // reading it finish (no renaming), so each load follows the earliest product that frees its
  // register instead of all four loads waiting for the step's last product.
  for (int64_t s = s0; s < s1; ++s) {
    const uint16_t* b = wp + s * kTileElems;
    for (int p = 0; p < PARTS; ++p) {
      const uint16_t* a = x.data + p * part_elems + ((i / 16) * ksteps + s) * kTileElems;
      _tile_loadd(4, a, kAmxTileBytes);
      if (p == 0) _tile_loadd(6, b, kAmxTileBytes);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (CT == 2) {
        if (p == 0) _tile_loadd(7, b + pstride, kAmxTileBytes);
        _tile_dpbf16ps(1, 4, 7);
      }
      if constexpr (RT == 2) {
        _tile_loadd(5, a + ksteps * kTileElems, kAmxTileBytes);
        _tile_dpbf16ps(2, 5, 6);
        if constexpr (CT == 2) _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  if (y) {  // the last k block of whole tiles without bias: the accumulators are the outputs
    store_acc_tiles<RT, CT>(y, 16 * ldy, 16, ldy * static_cast<int64_t>(sizeof(float)));
    return;
  }
  store_acc_tiles<RT, CT>(cbuf, r16, 16, ldc);
}

// The GEMM path (many rows: prefill, mixed steps). Rows in passes of kRowPass, columns in groups
// of kGroupCols, k in blocks of kKBlockSteps × 32; within a k block, each 32-row block runs over
// every pair of panels of the group. So the row block's A tiles (2 row tiles × 8 steps × parts:
// 16 or 32 KiB) stay in L1 while all pairs use them, B streams from L2 (the group's k block:
// 256 columns × 256 k × 2 bytes = 128 KiB), and the group's accumulators (256 × 256 f32) wait in
// a per-thread buffer between k blocks. A is the operand worth keeping in L1: at `high` a k step
// loads 4 A tiles (2 rows × hi, lo) and 2 B tiles (measured, one thread, m = 512, gate_up and down
// shapes: 3–8 % faster at high and ~3 % at medium than B in L1 and A from L2).
constexpr int64_t kKBlockSteps = 8;

// Whether the 32-row block at row i (two row tiles or one) of a pair of panels with `cols`
// columns can take its last k block's accumulators straight into y: whole tiles (every row below
// m, every column of the pair present) and no bias. The others go through the buffer and
// store_rows. Either way y gets the same f32 values.
inline bool direct_block(const LinearTask& t, int64_t i, bool two_rows, int64_t cols) {
  return t.bias == nullptr && i + (two_rows ? 32 : 16) <= t.m && (cols == 32 || cols == 16);
}

template <int PARTS>
inline void linear_cols_gemm(const AmxActivations& x, const LinearTask& t, int64_t n0, int64_t n1) {
  const auto* w = static_cast<const uint16_t*>(t.w);
  const int64_t pstride = bf16_panel_elems(t.k);
  const int64_t ksteps = x.ldx / 32;
  alignas(64) static thread_local float cbuf[kRowPass * kGroupLd];  // [pass rows, group columns]
  for (int64_t i0 = 0; i0 < x.m_pad; i0 += kRowPass) {
    const int64_t i1 = x.m_pad - i0 < kRowPass ? x.m_pad : i0 + kRowPass;
    for (int64_t g0 = n0; g0 < n1; g0 += kGroupCols) {
      const int64_t g1 = n1 - g0 < kGroupCols ? n1 : g0 + kGroupCols;
      for (int64_t s0 = 0; s0 < ksteps; s0 += kKBlockSteps) {
        const int64_t s1 = ksteps - s0 < kKBlockSteps ? ksteps : s0 + kKBlockSteps;
        for (int64_t i = i0; i < i1; i += 32) {
          for (int64_t c0 = g0; c0 < g1; c0 += 32) {
            const int64_t cols = g1 - c0 < 32 ? g1 - c0 : 32;
            const uint16_t* wp = w + (c0 / kPanelCols) * pstride;
            float* cb = cbuf + (i - i0) * kGroupLd + (c0 - g0);
            const bool two_rows = i + 16 < i1;
            float* yd = s1 == ksteps && direct_block(t, i, two_rows, cols) ? t.y + i * t.n_out + c0 : nullptr;
            if (cols > 16) {
              if (two_rows) tile_kblock<2, 2, PARTS>(x, i, wp, pstride, s0, s1, cb, yd, t.n_out);
              else tile_kblock<1, 2, PARTS>(x, i, wp, pstride, s0, s1, cb, yd, t.n_out);
            } else {
              if (two_rows) tile_kblock<2, 1, PARTS>(x, i, wp, pstride, s0, s1, cb, yd, t.n_out);
              else tile_kblock<1, 1, PARTS>(x, i, wp, pstride, s0, s1, cb, yd, t.n_out);
            }
          }
        }
      }
      // y = accumulators (+ bias) for the blocks not stored directly: valid rows and columns only.
      for (int64_t i = i0; i < i1 && i < t.m; i += 16) {
        const int64_t block = i0 + (i - i0) / 32 * 32;  // the 32-row block holding row tile i
        const bool two_rows = block + 16 < i1;
        const int64_t rows = t.m - i < 16 ? t.m - i : 16;
        for (int64_t c0 = g0; c0 < g1; c0 += 16) {
          const int64_t pair = g0 + (c0 - g0) / 32 * 32;
          const int64_t pair_cols = g1 - pair < 32 ? g1 - pair : 32;
          if (direct_block(t, block, two_rows, pair_cols)) continue;
          const int64_t n = g1 - c0 < 16 ? g1 - c0 : 16;
          store_rows(cbuf + (i - i0) * kGroupLd + (c0 - g0), kGroupLd, rows, n, t.bias ? t.bias + c0 : nullptr,
                     t.y + i * t.n_out + c0, t.n_out);
        }
      }
    }
  }
}

template <int PARTS>
inline void linear_cols_parts(const AmxActivations& x, const LinearTask& t, int64_t n0, int64_t n1) {
  if (x.m_pad <= kPrefetchRows)
    linear_cols_stream<PARTS>(x, t, n0, n1);
  else
    linear_cols_gemm<PARTS>(x, t, n0, n1);
}

// Columns [n0, n1) (n0 a multiple of 16) of y for all m rows. Loads the tile configuration for
// this thread and releases the tile state on return (so a thread not running AMX holds none).
inline void linear_cols_amx(const AmxActivations& x, const LinearTask& t, int64_t n0, int64_t n1) {
  _tile_loadconfig(&kAmxConfigFull);
  switch (x.parts) {
    case 1: linear_cols_parts<1>(x, t, n0, n1); break;
    case 2: linear_cols_parts<2>(x, t, n0, n1); break;
    default: linear_cols_parts<3>(x, t, n0, n1); break;
  }
  _tile_release();
}

}  // namespace pypto::cpu::amx
