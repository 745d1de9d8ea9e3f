#pragma once
// What the AVX2 quantized-weight register tiles share (linear_quant_avx2.cpp, int8 activations;
// linear_quant_i16_avx2.cpp, int16 activations): the L1 prefetch along a weight stream, the
// broadcast of 4 activation bytes (4 int8 or 2 int16), the store of 8 output columns of one row
// (bias added), an Int4 group's zero points and scales of 8 columns, the walk of a column chunk by
// register tiles. AVX2 translation units only, hence
// the anonymous namespace.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_q4_group.h"

namespace pypto::cpu {
namespace {

inline void prefetch_l1(const void* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0); }

// The 4 bytes at p in every 32-bit lane.
inline __m256i bcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// y[i][c0 .. c0 + 8) = v (+ bias), the columns past n_out left alone (c0 < n_out).
inline void store_out8(const QuantLinearTask& t, int64_t i, int64_t c0, __m256 v) {
  const int64_t left = t.n_out - c0;
  float* dst = t.y + i * t.n_out + c0;
  if (left >= 8) {
    if (t.bias) v = _mm256_add_ps(v, _mm256_loadu_ps(t.bias + c0));
    _mm256_storeu_ps(dst, v);
    return;
  }
  const __m256i mk = _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(left)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  if (t.bias) v = _mm256_add_ps(v, _mm256_maskload_ps(t.bias + c0, mk));
  _mm256_maskstore_ps(dst, mk, v);
}

// Int4 group grp's zero points (u8 widened to s32) and scales of ymm column yy of its super-panel
// (panel yy / 2, columns 8 · (yy % 2) ..; the tail's layout: quant_q4_group.h).
inline __m256i q4_column_zeros(const Q4Group& grp, int yy) {
  return _mm256_cvtepu8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(grp.tail + 256 + (yy / 2) * 16 + (yy % 2) * 8)));
}
inline __m256 q4_column_scales(const Q4Group& grp, int yy) {
  return _mm256_loadu_ps(reinterpret_cast<const float*>(grp.tail + (yy / 2) * 64 + (yy % 2) * 32));
}

// A register tile of an AVX2 quantized kernel: rows from i0, over column block p (an Int8 panel
// of 16 columns, an Int4 super-panel of 64).
using QuantTileFn = void (*)(const QuantLinearTask&, int64_t i0, int64_t p);

// Int8 columns [n0, n1) (n0 a multiple of 16). A lone row walks 4 panels per tile (one_row[v - 1]:
// 1 row × v panels; 4 weight streams); more rows go one panel at a time, in blocks of up to Rows
// (rows[r - 1]: r rows × 1 panel; the panel stays in L1 / L2 between blocks). Which tile runs
// never changes a result.
template <int Rows>
inline void q8_columns(const QuantLinearTask& t, int64_t n0, int64_t n1, const QuantTileFn (&one_row)[4],
                       const QuantTileFn (&rows)[Rows]) {
  const int64_t p0 = n0 / 16, p1 = (n1 + 15) / 16;
  if (t.m == 1) {
    int64_t p = p0;
    for (; p + 4 <= p1; p += 4) one_row[3](t, 0, p);
    if (p < p1) one_row[p1 - p - 1](t, 0, p);
    return;
  }
  for (int64_t p = p0; p < p1; ++p)
    for (int64_t i = 0; i < t.m; i += Rows) rows[(t.m - i < Rows ? t.m - i : Rows) - 1](t, i, p);
}

// Int4 columns [n0, n1) (n0 a multiple of 64: whole super-panels), rows in blocks of up to Rows per
// super-panel (rows[r - 1]: r rows; the super-panel stays in L2 between blocks, and up to Rows rows
// the weights stream from DRAM once).
template <int Rows>
inline void q4_columns(const QuantLinearTask& t, int64_t n0, int64_t n1, const QuantTileFn (&rows)[Rows]) {
  const int64_t sp1 = (n1 + 63) / 64;
  for (int64_t sp = n0 / 64; sp < sp1; ++sp)
    for (int64_t i = 0; i < t.m; i += Rows) rows[(t.m - i < Rows ? t.m - i : Rows) - 1](t, i, sp);
}

}  // namespace
}  // namespace pypto::cpu
