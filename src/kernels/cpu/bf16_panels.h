#pragma once
// The run-time layout of bf16 weights for the bf16-dot linear (MatmulPrecision high / medium):
// W[n, k] stored as panels of 16 output columns by k-pairs, so one 64-byte load holds, for 16
// columns, the two weights VDPBF16PS multiplies with one broadcast pair of x:
//
//   Wp[p][q][c][s] = W[16p + c][2q + s]    p < ceil(n / 16), q < Q(k), c < 16, s < 2
//
// (zeros past n or k), Q(k) = ceil(k / 32) · 16: the pairs are padded to a multiple of 16, so
// every run of 16 pairs of a panel (1 KiB: 16 rows of 64 bytes) is exactly one AMX-BF16 B tile
// (K = 32 bf16 by N = 16 f32 outputs, kernels/cpu/linear_amx_impl.h) and the AMX kernel never
// needs a partial tile. Qwen3's k (1024 … 17408) are multiples of 32: the pad costs nothing there.
// Panel p is one contiguous run of Q(k) · 64 bytes, so a GEMV streams
// a few long runs and a GEMM keeps a group of panels in L2 while rows of x pass by. Accumulators
// then hold 16 outputs each: no horizontal sums, and the k order of every output is simply
// q = 0, 1, 2, ... whatever the tile shape (kernels/cpu/linear_bf16dot_impl.h).
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pypto::cpu {

constexpr int64_t kPanelCols = 16;

inline int64_t bf16_panel_count(int64_t n) { return (n + kPanelCols - 1) / kPanelCols; }
constexpr int64_t kPanelTilePairs = 16;  // pairs of one AMX B tile
inline int64_t bf16_panel_pairs(int64_t k) { return (k + 2 * kPanelTilePairs - 1) / (2 * kPanelTilePairs) * kPanelTilePairs; }
// Elements (uint16) of one panel: pairs × 16 columns × 2.
inline int64_t bf16_panel_elems(int64_t k) { return bf16_panel_pairs(k) * kPanelCols * 2; }
// Bytes of the whole layout (a multiple of 64: one panel row of a pair is 64 bytes).
inline size_t bf16_panels_bytes(int64_t n, int64_t k) {
  return static_cast<size_t>(bf16_panel_count(n) * bf16_panel_elems(k)) * sizeof(uint16_t);
}

// src: plain row-major W[n, k] (bf16 bits); dst: bf16_panels_bytes(n, k) bytes.
inline void pack_bf16_panels(const uint16_t* src, int64_t n, int64_t k, uint16_t* dst) {
  std::memset(dst, 0, bf16_panels_bytes(n, k));
  const int64_t pairs = (k + 1) / 2;  // pairs holding data; the rest of Q(k) stays zero
  for (int64_t r = 0; r < n; ++r) {
    uint16_t* panel = dst + (r / kPanelCols) * bf16_panel_elems(k) + (r % kPanelCols) * 2;
    const uint16_t* row = src + r * k;
    for (int64_t q = 0; q < pairs; ++q) {
      panel[q * kPanelCols * 2] = row[2 * q];
      if (2 * q + 1 < k) panel[q * kPanelCols * 2 + 1] = row[2 * q + 1];
    }
  }
}

// out[k] = row r of the panel layout `packed` (of a [n, k] weight) as f32: the inverse of
// pack_bf16_panels for one row, for an embedding lookup from a tied lm_head's packed copy.
// Element (r, 2q + s) sits at panel r / 16, pair q, column r % 16, slot s.
inline void bf16_panel_row_to_f32(const uint16_t* packed, int64_t k, int64_t r, float* out) {
  const uint16_t* col = packed + (r / kPanelCols) * bf16_panel_elems(k) + (r % kPanelCols) * 2;
  for (int64_t j = 0; j < k; ++j) {
    const uint32_t bits = uint32_t(col[(j / 2) * kPanelCols * 2 + (j % 2)]) << 16;
    std::memcpy(out + j, &bits, sizeof bits);
  }
}

}  // namespace pypto::cpu
