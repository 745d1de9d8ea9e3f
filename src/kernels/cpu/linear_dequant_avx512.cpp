// Quantized linears with f32 activations (AVX-512): W is dequantized exactly in registers, 16
// columns at a time, and multiplied into f32 accumulators with FMA, on the panels of
// kernels/cpu/quant_panels.h:
//   Fp8:  e4m3 → f16 bits (exponent and mantissa moved into place; every e4m3 value is an f16
//         value 2^8 times smaller) → f32 (VCVTPH2PS) → × (scale · 2^8): one rounding, the same as
//         e4m3_to_f32(q) · scale.
//   Int8: s8 → f32 → × scale.   Int4: (q − zero) → f32 → × scale (exact: 5 bits × an f16 scale).
// Register tile: R ≤ 4 rows by V ≤ 2 panels; below 4 rows, R ≤ 2 by V = 4 panels: each output is
// one chain of dependent FMAs along k, so a single row needs several panels in flight (V = 2 -> 4
// took one-row FP8 from 36 % to 55-61 % of the read bound, int8 from 47 to 67 %, int4 from 22 to
// 30 %; BM_QuantLinear f32 activations, Xeon with AMX). Order per output, whatever m and the
// tile: acc = 0; for k = 0, 1, ...: acc = fma(x[k], w[k], acc); y = acc (+ bias). So these are
// batch-invariant.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::dequant {
namespace {

constexpr int kRows = 4;
constexpr int kPanels = 2;

inline __mmask16 col_mask(int64_t c0, int64_t n_out) {
  const int64_t left = n_out - c0;
  return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u);
}

// y rows [i0, i0 + R), panels [p0, p0 + V) = acc (+ bias), masked past n_out.
template <int R, int V>
inline void store_tile(const QuantLinearTask& t, int64_t i0, int64_t p0, const __m512 (&acc)[R][V]) {
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      const int64_t c0 = (p0 + v) * 16;
      const __mmask16 mk = col_mask(c0, t.n_out);
      __m512 y = acc[r][v];
      if (t.bias) y = _mm512_add_ps(y, _mm512_maskz_loadu_ps(mk, t.bias + c0));
      _mm512_mask_storeu_ps(t.y + (i0 + r) * t.n_out + c0, mk, y);
    }
}

// 16 e4m3 bytes → 16 f32 values / 2^8.
inline __m512 e4m3x16_scaled_down(const uint8_t* p) {
  const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i mag = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7F)), 7);
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
  return _mm512_cvtph_ps(_mm256_or_si256(mag, sign));
}

// 32 e4m3 bytes (two consecutive inputs of one panel) → their f16 bits, values 2^8 times smaller:
// magnitude bits moved up by 7, the sign to bit 15 (5 integer ops for 32 weights).
inline __m512i e4m3x32_to_f16_bits(const uint8_t* p) {
  const __m512i b = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  const __m512i mag = _mm512_and_si512(_mm512_slli_epi16(b, 7), _mm512_set1_epi16(0x3F80));
  // mag | (b << 8 & 0x8000): ternary-logic table 0xF8 is A | (B & C).
  return _mm512_ternarylogic_epi32(mag, _mm512_slli_epi16(b, 8), _mm512_set1_epi16(static_cast<short>(0x8000)), 0xF8);
}

template <int R, int V>
void fp8_tile(const QuantLinearTask& t, int64_t i0, int64_t p0) {
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  const __m512 up = _mm512_set1_ps(256.0f);
  for (int64_t gi = 0; gi < t.groups; ++gi) {
    __m512 s[V];
    for (int v = 0; v < V; ++v) s[v] = _mm512_mul_ps(_mm512_loadu_ps(t.scale + ((p0 + v) * t.groups + gi) * 16), up);
    const int64_t k1 = (gi + 1) * t.group < t.k ? (gi + 1) * t.group : t.k;
    int64_t k = gi * t.group;
    // Two inputs at a time: their 2 × 16 bytes are adjacent in a panel.
    for (; k + 2 <= k1; k += 2) {
      __m512 w0[V], w1[V];
      for (int v = 0; v < V; ++v) {
        const __m512i h = e4m3x32_to_f16_bits(t.w + ((p0 + v) * t.k + k) * 16);
        w0[v] = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(h)), s[v]);
        w1[v] = _mm512_mul_ps(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(h, 1)), s[v]);
      }
      for (int r = 0; r < R; ++r) {
        const __m512 x0 = _mm512_set1_ps(t.x[(i0 + r) * t.k + k]);
        const __m512 x1 = _mm512_set1_ps(t.x[(i0 + r) * t.k + k + 1]);
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x1, w1[v], _mm512_fmadd_ps(x0, w0[v], acc[r][v]));
      }
    }
    for (; k < k1; ++k) {
      __m512 w[V];
      for (int v = 0; v < V; ++v) w[v] = _mm512_mul_ps(e4m3x16_scaled_down(t.w + ((p0 + v) * t.k + k) * 16), s[v]);
      for (int r = 0; r < R; ++r) {
        const __m512 x = _mm512_set1_ps(t.x[(i0 + r) * t.k + k]);
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x, w[v], acc[r][v]);
      }
    }
  }
  store_tile<R, V>(t, i0, p0, acc);
}

template <int R, int V>
void q8_tile(const QuantLinearTask& t, int64_t i0, int64_t p0) {
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  const int64_t pstride = (t.k + 63) / 64 * 1024;
  __m512 s[V];
  for (int v = 0; v < V; ++v) s[v] = _mm512_loadu_ps(t.scale + (p0 + v) * 16);
  for (int64_t q = 0; 4 * q < t.k; ++q) {
    __m512i b[V];
    for (int v = 0; v < V; ++v) b[v] = _mm512_loadu_si512(t.w + (p0 + v) * pstride + q * 64);
    const int n = t.k - 4 * q < 4 ? static_cast<int>(t.k - 4 * q) : 4;
    for (int j = 0; j < n; ++j) {
      __m512 w[V];
      for (int v = 0; v < V; ++v) {
        const __m512i l = _mm512_srai_epi32(_mm512_sllv_epi32(b[v], _mm512_set1_epi32(24 - 8 * j)), 24);
        w[v] = _mm512_mul_ps(_mm512_cvtepi32_ps(l), s[v]);
      }
      for (int r = 0; r < R; ++r) {
        const __m512 x = _mm512_set1_ps(t.x[(i0 + r) * t.k + 4 * q + j]);
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x, w[v], acc[r][v]);
      }
    }
  }
  store_tile<R, V>(t, i0, p0, acc);
}

template <int R, int V>
void q4_tile(const QuantLinearTask& t, int64_t i0, int64_t p0) {
  __m512 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  const int64_t G = t.groups, g = t.group, chunks = g / 8, rec = int64_t(g / 8) * 256 + 256 + 64;
  const __m512i nib = _mm512_set1_epi32(0x0F);
  // Panel p is lane p % 4 of super-panel p / 4 (quant_panels.h); p0 is even, so p0 and p0 + 1
  // share a super-panel.
  const int64_t sp = p0 / 4, lane0 = p0 % 4;
  for (int64_t gi = 0; gi < G; ++gi) {
    const uint8_t* record = t.w + (sp * G + gi) * rec;
    __m512 s[V];
    __m512i z[V];
    for (int v = 0; v < V; ++v) {
      s[v] = _mm512_loadu_ps(reinterpret_cast<const float*>(record + chunks * 256 + (lane0 + v) * 64));
      z[v] = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(record + chunks * 256 + 256 + (lane0 + v) * 16)));
    }
    const int64_t k0 = gi * g;
    const int64_t n_chunks = (t.k - k0) / 8 < chunks ? (t.k - k0) / 8 : chunks;
    for (int64_t ch = 0; ch < n_chunks; ++ch) {
      __m512i b[V];
      for (int v = 0; v < V; ++v) b[v] = _mm512_loadu_si512(record + ch * 256 + (lane0 + v) * 64);
      for (int j = 0; j < 8; ++j) {  // k = k0 + 8 ch + j: byte j % 4, low nibble for j < 4
        const int shift = 8 * (j % 4) + (j < 4 ? 0 : 4);
        __m512 w[V];
        for (int v = 0; v < V; ++v) {
          const __m512i q = _mm512_and_si512(_mm512_srlv_epi32(b[v], _mm512_set1_epi32(shift)), nib);
          w[v] = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(q, z[v])), s[v]);
        }
        for (int r = 0; r < R; ++r) {
          const __m512 x = _mm512_set1_ps(t.x[(i0 + r) * t.k + k0 + 8 * ch + j]);
          for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x, w[v], acc[r][v]);
        }
      }
    }
  }
  store_tile<R, V>(t, i0, p0, acc);
}

template <int R, int V>
void tile(const QuantLinearTask& t, int64_t i, int64_t p) {
  switch (t.format) {
    case WeightFormat::Fp8: fp8_tile<R, V>(t, i, p); break;
    case WeightFormat::Int8: q8_tile<R, V>(t, i, p); break;
    case WeightFormat::Int4: q4_tile<R, V>(t, i, p); break;
    case WeightFormat::Float: break;
  }
}

template <int V>
void rows(const QuantLinearTask& t, int64_t p) {
  int64_t i = 0;
  for (; i + kRows <= t.m; i += kRows) tile<kRows, V>(t, i, p);
  switch (t.m - i) {
    case 3: tile<3, V>(t, i, p); break;
    case 2: tile<2, V>(t, i, p); break;
    case 1: tile<1, V>(t, i, p); break;
    default: break;
  }
}

// Four panels, rows two at a time (more independent accumulator chains per W load for few rows).
void rows_wide(const QuantLinearTask& t, int64_t p) {
  int64_t i = 0;
  for (; i + 2 <= t.m; i += 2) tile<2, 4>(t, i, p);
  if (i < t.m) tile<1, 4>(t, i, p);
}

void linear_cols_dq(const QuantLinearTask& t, int64_t n0, int64_t n1) {
  const int64_t p0 = n0 / 16, p1 = (n1 + 15) / 16;
  int64_t p = p0;
  // One FP8 row: eight panels (its conversion leaves the registers for it; 62-75 -> 71-85 % of the
  // read bound per shape).
  if (t.m == 1 && t.format == WeightFormat::Fp8)
    for (; p + 8 <= p1; p += 8) fp8_tile<1, 8>(t, 0, p);
  if (t.m < kRows)
    for (; p + 4 <= p1; p += 4) rows_wide(t, p);
  for (; p < p1; p += kPanels) {
    if (p1 - p >= 2) rows<2>(t, p);
    else rows<1>(t, p);
  }
}

}  // namespace
}  // namespace pypto::cpu::dequant

namespace pypto::cpu {
void fill_linear_dequant_avx512(KernelTable& t) { t.linear_cols_dq = dequant::linear_cols_dq; }
}  // namespace pypto::cpu
