// Quantized linears with f32 activations on AVX2: W is dequantized exactly in registers and
// multiplied into f32 accumulators with FMA, on the panels of kernels/cpu/quant_panels.h. The same
// arithmetic as the AVX-512 kernel (linear_dequant_avx512.cpp), on 8 lanes: each 16-column panel
// is two ymm halves (columns 0-7, 8-15).
//   Fp8:  e4m3 → f16 bits (exponent and mantissa moved into place; every e4m3 value is an f16
//         value 2^8 times smaller) → f32 (VCVTPH2PS) → × (scale · 2^8): one rounding, the same as
//         e4m3_to_f32(q) · scale.
//   Int8: s8 → f32 → × scale.   Int4: (q − zero) → f32 → × scale (exact: 5 bits × an f16 scale).
// Order per output, whatever m and the tile: acc = 0; for k = 0, 1, ...: acc = fma(x[k], w[k], acc);
// y = acc (+ bias). So these are batch-invariant (and give the AVX-512 kernel's bits).
// Register tiles (16 ymm): R ≤ 4 rows × 1 panel from 4 rows on; below, R ≤ 2 rows × 2 panels, and
// a lone row walks 4 panels (8 independent FMA chains, as one row needs several panels in flight).
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::dequant_avx2 {
namespace {

constexpr int kRows = 4;

// Stores 8 columns at c0 of row i (+ bias), only those below n_out.
inline void store8(const QuantLinearTask& t, int64_t i, int64_t c0, __m256 y) {
  const int64_t left = t.n_out - c0;
  if (left <= 0) return;
  float* dst = t.y + i * t.n_out + c0;
  if (left >= 8) {
    if (t.bias) y = _mm256_add_ps(y, _mm256_loadu_ps(t.bias + c0));
    _mm256_storeu_ps(dst, y);
    return;
  }
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, y);
  for (int64_t c = 0; c < left; ++c) dst[c] = t.bias ? tmp[c] + t.bias[c0 + c] : tmp[c];
}

template <int R, int V>
inline void store_tile(const QuantLinearTask& t, int64_t i0, int64_t p0, const __m256 (&acc)[R][V][2]) {
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v)
      for (int h = 0; h < 2; ++h) store8(t, i0 + r, (p0 + v) * 16 + 8 * h, acc[r][v][h]);
}

template <int R, int V>
inline void zero_tile(__m256 (&acc)[R][V][2]) {
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v][0] = acc[r][v][1] = _mm256_setzero_ps();
}

// acc[r][v][h] = fma(x[i0 + r, k], w[v][h], acc[r][v][h]) for the tile's rows.
template <int R, int V>
inline void fma_rows(const QuantLinearTask& t, int64_t i0, int64_t k, const __m256 (&w)[V][2], __m256 (&acc)[R][V][2]) {
  for (int r = 0; r < R; ++r) {
    const __m256 x = _mm256_broadcast_ss(t.x + (i0 + r) * t.k + k);
    for (int v = 0; v < V; ++v) {
      acc[r][v][0] = _mm256_fmadd_ps(x, w[v][0], acc[r][v][0]);
      acc[r][v][1] = _mm256_fmadd_ps(x, w[v][1], acc[r][v][1]);
    }
  }
}

// 16 e4m3 bytes → their f16 bits, values 2^8 times smaller: magnitude bits moved up by 7, the sign
// to bit 15.
inline __m256i e4m3x16_to_f16_bits(const uint8_t* p) {
  const __m256i b = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i mag = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x7F)), 7);
  const __m256i sign = _mm256_slli_epi16(_mm256_and_si256(b, _mm256_set1_epi16(0x80)), 8);
  return _mm256_or_si256(mag, sign);
}

template <int R, int V>
void fp8_tile(const QuantLinearTask& t, int64_t i0, int64_t p0) {
  __m256 acc[R][V][2];
  zero_tile<R, V>(acc);
  const __m256 up = _mm256_set1_ps(256.0f);
  for (int64_t gi = 0; gi < t.groups; ++gi) {
    __m256 s[V][2];
    for (int v = 0; v < V; ++v)
      for (int h = 0; h < 2; ++h) s[v][h] = _mm256_mul_ps(_mm256_loadu_ps(t.scale + ((p0 + v) * t.groups + gi) * 16 + 8 * h), up);
    const int64_t k1 = (gi + 1) * t.group < t.k ? (gi + 1) * t.group : t.k;
    for (int64_t k = gi * t.group; k < k1; ++k) {
      __m256 w[V][2];
      for (int v = 0; v < V; ++v) {
        const __m256i h = e4m3x16_to_f16_bits(t.w + ((p0 + v) * t.k + k) * 16);
        w[v][0] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(h)), s[v][0]);
        w[v][1] = _mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(h, 1)), s[v][1]);
      }
      fma_rows<R, V>(t, i0, k, w, acc);
    }
  }
  store_tile<R, V>(t, i0, p0, acc);
}

// Int8 quad panels: per 4 inputs, 64 bytes of 16 columns × 4 (column c's 4 values at 4c); the ymm
// halves hold columns 0-7 and 8-15. Byte j of each 32-bit lane is input 4q + j.
template <int R, int V>
void q8_tile(const QuantLinearTask& t, int64_t i0, int64_t p0) {
  __m256 acc[R][V][2];
  zero_tile<R, V>(acc);
  const int64_t pstride = (t.k + 63) / 64 * 1024;
  __m256 s[V][2];
  for (int v = 0; v < V; ++v)
    for (int h = 0; h < 2; ++h) s[v][h] = _mm256_loadu_ps(t.scale + (p0 + v) * 16 + 8 * h);
  for (int64_t q = 0; 4 * q < t.k; ++q) {
    __m256i b[V][2];
    for (int v = 0; v < V; ++v)
      for (int h = 0; h < 2; ++h)
        b[v][h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(t.w + (p0 + v) * pstride + q * 64 + 32 * h));
    const int n = t.k - 4 * q < 4 ? static_cast<int>(t.k - 4 * q) : 4;
    for (int j = 0; j < n; ++j) {
      const __m128i up = _mm_cvtsi32_si128(24 - 8 * j);
      __m256 w[V][2];
      for (int v = 0; v < V; ++v)
        for (int h = 0; h < 2; ++h) {
          const __m256i l = _mm256_srai_epi32(_mm256_sll_epi32(b[v][h], up), 24);
          w[v][h] = _mm256_mul_ps(_mm256_cvtepi32_ps(l), s[v][h]);
        }
      fma_rows<R, V>(t, i0, 4 * q + j, w, acc);
    }
  }
  store_tile<R, V>(t, i0, p0, acc);
}

// Int4 super-panel records (quant_panels.h): per group, group / 8 chunks of 4 panels × 64 bytes
// (byte 4c + s of a panel: column c at k = 8j + s in the low nibble, 8j + 4 + s in the high one),
// then scale f32 [4][16], zero u8 [4][16]. V panels from p0 stay inside one super-panel.
template <int R, int V>
void q4_tile(const QuantLinearTask& t, int64_t i0, int64_t p0) {
  static_assert(V == 1 || V == 2 || V == 4, "panels of a tile share a super-panel");
  __m256 acc[R][V][2];
  zero_tile<R, V>(acc);
  const int64_t G = t.groups, g = t.group, chunks = g / 8, rec = int64_t(g / 8) * 256 + 256 + 64;
  const __m256i nib = _mm256_set1_epi32(0x0F);
  const int64_t sp = p0 / 4, lane0 = p0 % 4;
  for (int64_t gi = 0; gi < G; ++gi) {
    const uint8_t* record = t.w + (sp * G + gi) * rec;
    __m256 s[V][2];
    __m256i z[V][2];
    for (int v = 0; v < V; ++v)
      for (int h = 0; h < 2; ++h) {
        s[v][h] = _mm256_loadu_ps(reinterpret_cast<const float*>(record + chunks * 256 + (lane0 + v) * 64 + 32 * h));
        z[v][h] = _mm256_cvtepu8_epi32(
            _mm_loadl_epi64(reinterpret_cast<const __m128i*>(record + chunks * 256 + 256 + (lane0 + v) * 16 + 8 * h)));
      }
    const int64_t k0 = gi * g;
    const int64_t n_chunks = (t.k - k0) / 8 < chunks ? (t.k - k0) / 8 : chunks;
    for (int64_t ch = 0; ch < n_chunks; ++ch) {
      __m256i b[V][2];
      for (int v = 0; v < V; ++v)
        for (int h = 0; h < 2; ++h)
          b[v][h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(record + ch * 256 + (lane0 + v) * 64 + 32 * h));
      for (int j = 0; j < 8; ++j) {  // k = k0 + 8 ch + j: byte j % 4, low nibble for j < 4
        const __m128i shift = _mm_cvtsi32_si128(8 * (j % 4) + (j < 4 ? 0 : 4));
        __m256 w[V][2];
        for (int v = 0; v < V; ++v)
          for (int h = 0; h < 2; ++h) {
            const __m256i q = _mm256_and_si256(_mm256_srl_epi32(b[v][h], shift), nib);
            w[v][h] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, z[v][h])), s[v][h]);
          }
        fma_rows<R, V>(t, i0, k0 + 8 * ch + j, w, acc);
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

// One panel, rows four at a time.
void rows_narrow(const QuantLinearTask& t, int64_t p) {
  int64_t i = 0;
  for (; i + kRows <= t.m; i += kRows) tile<kRows, 1>(t, i, p);
  switch (t.m - i) {
    case 3: tile<3, 1>(t, i, p); break;
    case 2: tile<2, 1>(t, i, p); break;
    case 1: tile<1, 1>(t, i, p); break;
    default: break;
  }
}

// V panels, rows two at a time (more independent FMA chains per weight load for few rows).
template <int V>
void rows_wide(const QuantLinearTask& t, int64_t p) {
  int64_t i = 0;
  for (; i + 2 <= t.m; i += 2) tile<2, V>(t, i, p);
  if (i < t.m) tile<1, V>(t, i, p);
}

void linear_cols_dq(const QuantLinearTask& t, int64_t n0, int64_t n1) {
  const int64_t p0 = n0 / 16, p1 = (n1 + 15) / 16;
  int64_t p = p0;
  if (t.m == 1) {
    // Int4 tiles of 4 panels must start a super-panel; the backend's column chunks start on one.
    if (t.format != WeightFormat::Int4 || p % 4 == 0)
      for (; p + 4 <= p1; p += 4) tile<1, 4>(t, 0, p);
  } else if (t.m < kRows) {
    if (t.format != WeightFormat::Int4 || p % 2 == 0)
      for (; p + 2 <= p1; p += 2) rows_wide<2>(t, p);
  }
  for (; p < p1; ++p) rows_narrow(t, p);
}

}  // namespace
}  // namespace pypto::cpu::dequant_avx2

namespace pypto::cpu {
void fill_linear_dequant_avx2(KernelTable& t) { t.linear_cols_dq = dequant_avx2::linear_cols_dq; }
}  // namespace pypto::cpu
