#pragma once
// The integer core of an int8 linear on AMX-INT8 tiles (TDPBUSD): acc[m, n] = Σ_k xq[m, k] ·
// wq[n, k] with xq unsigned 8-bit (activations quantized per token with a zero point) and wq
// signed 8-bit in quad panels (kernels/cpu/int8_panels.h). One TDPBUSD multiplies a 16 × 64 u8 A
// tile by a 16-quad × 16 column s8 B tile into 16 × 16 s32: 16,384 multiply-adds, 2× the bf16
// tile product. The sums are exact integers (|acc| ≤ k · 255 · 128 < 2^31 for k < 65,793), so the
// result is the same whatever the tiling, batch or thread: batch-invariant by construction. The
// quantized formats (scales, zero points, the f32 epilogue) build on this.
//
// x arrives in A-tile order (AmxInt8Activations): [m_pad / 16, ldx / 64, 16 rows, 64 bytes],
// zeros past m and k. Register blocking as the bf16 kernel: 2 × 2 accumulator tiles (tmm0-3),
// A in tmm4-5, B in tmm6-7.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/amx_tile.h"
#include "kernels/cpu/int8_panels.h"
#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::amx {

template <int RT, int CT>
inline void int8_tile_block(const AmxInt8Activations& x, int64_t i, const int8_t* wp, int64_t pstride,
                            const LinearInt8Task& t, int64_t c0, int64_t cols) {
  zero_acc_tiles<RT, CT>();
  const int64_t ksteps = x.ldx / 64;
  for (int64_t s = 0; s < ksteps; ++s) {
    const int8_t* b = wp + s * 1024;
    const uint8_t* a = x.data + ((i / 16) * ksteps + s) * 1024;
    _tile_loadd(4, a, kAmxTileBytes);
    _tile_loadd(6, b, kAmxTileBytes);
    _tile_dpbusd(0, 4, 6);
    if constexpr (CT == 2) {
      _tile_loadd(7, b + pstride, kAmxTileBytes);
      _tile_dpbusd(1, 4, 7);
    }
    if constexpr (RT == 2) {
      _tile_loadd(5, a + ksteps * 1024, kAmxTileBytes);
      _tile_dpbusd(2, 5, 6);
      if constexpr (CT == 2) _tile_dpbusd(3, 5, 7);
    }
  }
  alignas(64) int32_t c[4][16 * 16];
  store_acc_tiles<RT, CT>(c[0], 2 * 256, 256, kAmxTileBytes);
  for (int r = 0; r < RT; ++r) {
    const int64_t row0 = i + 16 * r;
    if (row0 >= t.m) break;
    const int64_t rows = t.m - row0 < 16 ? t.m - row0 : 16;
    for (int ct = 0; ct < CT; ++ct) {
      const int64_t n = cols - 16 * ct < 16 ? cols - 16 * ct : 16;
      for (int64_t rr = 0; rr < rows; ++rr)
        std::memcpy(t.y + (row0 + rr) * t.n_out + c0 + 16 * ct, c[2 * r + ct] + 16 * rr, n * sizeof(int32_t));
    }
  }
}

// Columns [n0, n1) (n0 a multiple of 16) of acc for all m rows.
inline void linear_cols_amx_int8(const AmxInt8Activations& x, const LinearInt8Task& t, int64_t n0, int64_t n1) {
  _tile_loadconfig(&kAmxConfigFull);
  const int64_t pstride = int8_panel_bytes(t.k);
  for (int64_t c0 = n0; c0 < n1; c0 += 32) {
    const int64_t cols = n1 - c0 < 32 ? n1 - c0 : 32;
    const int8_t* wp = t.w + (c0 / kInt8PanelCols) * pstride;
    for (int64_t i = 0; i < x.m_pad; i += 32) {
      const bool two_rows = i + 16 < x.m_pad;
      if (cols > 16) {
        if (two_rows) int8_tile_block<2, 2>(x, i, wp, pstride, t, c0, cols);
        else int8_tile_block<1, 2>(x, i, wp, pstride, t, c0, cols);
      } else {
        if (two_rows) int8_tile_block<2, 1>(x, i, wp, pstride, t, c0, cols);
        else int8_tile_block<1, 1>(x, i, wp, pstride, t, c0, cols);
      }
    }
  }
  _tile_release();
}

}  // namespace pypto::cpu::amx
