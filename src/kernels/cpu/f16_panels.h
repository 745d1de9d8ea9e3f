#pragma once
// The run-time layout of f16 weights on the AVX-512 and AVX2 backends (every matmul precision:
// f16 weights always meet f32 x): W[n, k] stored as panels of 16 output columns, k-major inside a
// panel, so one 32-byte load holds the 16 columns' weights for one k, which VCVTPH2PS widens
// exactly into the 16 f32 lanes of one accumulator (two 8-lane accumulators on AVX2):
//
//   Wp[p][j][c] = W[16p + c][j]    p < ceil(n / 16), j < K(k), c < 16
//
// (zeros past n or k), K(k) = k rounded up to even, so every panel (K(k) · 32 bytes) is a whole
// number of 64-byte lines and each panel starts on one. The lm_head of Qwen's GPTQ / AWQ
// checkpoints (151,936 × 2,048 f16) is the reason: on plain rows its batched decode ran at 36-38 %
// of the f32 FMA peak (lanes along k, horizontal sums per output, W widened to scratch first);
// here a register tile holds 16 outputs per accumulator and each widened weight vector serves
// every row of the tile (kernels/cpu/linear_f16_panels_impl.h).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace pypto::cpu {

constexpr int64_t kF16PanelCols = 16;

inline int64_t f16_panel_count(int64_t n) { return (n + kF16PanelCols - 1) / kF16PanelCols; }
// k steps stored per panel: k rounded up to even (a panel is then a multiple of 64 bytes).
inline int64_t f16_panel_steps(int64_t k) { return (k + 1) / 2 * 2; }
// Elements (uint16) of one panel.
inline int64_t f16_panel_elems(int64_t k) { return f16_panel_steps(k) * kF16PanelCols; }
inline size_t f16_panels_bytes(int64_t n, int64_t k) {
  return static_cast<size_t>(f16_panel_count(n) * f16_panel_elems(k)) * sizeof(uint16_t);
}

// Scratch of linear_cols_f16_panels_bf16dot (linear_f16_panels_bf16dot_impl.h) per thread: one
// group of 4 panels rounded to bf16 pairs (the f16 panel stride; 256 KiB at k = 2048).
inline size_t f16_bf16dot_scratch_bytes(int64_t k) { return static_cast<size_t>(4 * f16_panel_elems(k)) * sizeof(uint16_t); }

// src: plain row-major W[n, k] (f16 bits); dst: f16_panels_bytes(n, k) bytes.
inline void pack_f16_panels(const uint16_t* src, int64_t n, int64_t k, uint16_t* dst) {
  std::memset(dst, 0, f16_panels_bytes(n, k));
  for (int64_t r = 0; r < n; ++r) {
    uint16_t* col = dst + (r / kF16PanelCols) * f16_panel_elems(k) + r % kF16PanelCols;
    const uint16_t* row = src + r * k;
    for (int64_t j = 0; j < k; ++j) col[j * kF16PanelCols] = row[j];
  }
}

// out[k] = row r of the panel layout `packed` (of a [n, k] f16 weight) widened to f32: the
// inverse of pack_f16_panels for one row, for an embedding lookup from a tied lm_head's only
// (packed) copy. Element (r, j) sits at panel r / 16, step j, column r % 16.
inline void f16_panel_row_to_f32(const uint16_t* packed, int64_t k, int64_t r, float* out) {
  const uint16_t* col = packed + (r / kF16PanelCols) * f16_panel_elems(k) + r % kF16PanelCols;
  for (int64_t j = 0; j < k; ++j) out[j] = f16_to_f32(col[j * kF16PanelCols]);
}

}  // namespace pypto::cpu
