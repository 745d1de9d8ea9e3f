#pragma once
// The run-time layout of int8 weights for the AMX-INT8 kernel (TDPBUSD, linear_amx_int8_impl.h):
// W[n, k] (s8) stored as panels of 16 output columns by groups of 4 k, so one 64-byte row holds,
// for 16 columns, the 4 weights a TDPBUSD dot product multiplies with 4 bytes of x:
//
//   Wq[p][q][c][s] = W[16p + c][4q + s]    p < ceil(n / 16), q < Q(k), c < 16, s < 4
//
// (zeros past n or k), Q(k) = ceil(k / 64) · 16: every run of 16 quads of a panel (1 KiB) is
// exactly one B tile (K = 64 bytes by N = 16 s32 outputs), as bf16_panels.h is for AMX-BF16.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pypto::cpu {

constexpr int64_t kInt8PanelCols = 16;
constexpr int64_t kInt8TileQuads = 16;  // quads of one B tile (64 k)

inline int64_t int8_panel_count(int64_t n) { return (n + kInt8PanelCols - 1) / kInt8PanelCols; }
inline int64_t int8_panel_quads(int64_t k) { return (k + 63) / 64 * kInt8TileQuads; }
// Bytes of one panel: quads × 16 columns × 4.
inline int64_t int8_panel_bytes(int64_t k) { return int8_panel_quads(k) * kInt8PanelCols * 4; }
inline size_t int8_panels_bytes(int64_t n, int64_t k) { return static_cast<size_t>(int8_panel_count(n) * int8_panel_bytes(k)); }

// src: plain row-major W[n, k] (s8); dst: int8_panels_bytes(n, k) bytes.
inline void pack_int8_panels(const int8_t* src, int64_t n, int64_t k, int8_t* dst) {
  std::memset(dst, 0, int8_panels_bytes(n, k));
  for (int64_t r = 0; r < n; ++r) {
    int8_t* panel = dst + (r / kInt8PanelCols) * int8_panel_bytes(k) + (r % kInt8PanelCols) * 4;
    for (int64_t j = 0; j < k; ++j) panel[(j / 4) * kInt8PanelCols * 4 + j % 4] = src[r * k + j];
  }
}

// u8 activations x[m, k] in the A-tile order of AmxInt8Activations: [ceil(m / 16), ldx / 64, 16, 64]
// with ldx = ceil(k / 64) · 64, zeros past m and k. dst: amx_int8_rows_bytes(m, k) bytes.
inline int64_t amx_int8_ldx(int64_t k) { return (k + 63) / 64 * 64; }
inline size_t amx_int8_rows_bytes(int64_t m, int64_t k) {
  return static_cast<size_t>((m + 15) / 16 * 16 * amx_int8_ldx(k));
}
inline void pack_amx_int8_rows(const uint8_t* x, int64_t m, int64_t k, uint8_t* dst) {
  std::memset(dst, 0, amx_int8_rows_bytes(m, k));
  const int64_t ksteps = amx_int8_ldx(k) / 64;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t s = 0; s < ksteps; ++s) {
      const int64_t n = k - 64 * s < 64 ? k - 64 * s : 64;
      std::memcpy(dst + ((i / 16) * ksteps + s) * 1024 + (i % 16) * 64, x + i * k + 64 * s, static_cast<size_t>(n));
    }
}

}  // namespace pypto::cpu
