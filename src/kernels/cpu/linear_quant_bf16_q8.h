#pragma once
// Int8 weights with bf16-pair activations (MatmulPrecision High, W8A16): the register tiles shared by
// two exact int8 → bf16 conversions of a 64-byte quad-panel block (quant_panels.h: byte 16j + 4c + s
// is column 4j + c, input s of the quad):
//   Q8Widen  (AVX-512 BF16; linear_quant_bf16_avx512.cpp): VPMOVSXBD + VCVTDQ2PS four times, two
//            VCVTNE2PS2BF16 (exact: |q| ≤ 128 has at most 8 significant bits);
//   Q8Lookup (AVX-512 VBMI as well; linear_quant_bf16_vbmi.cpp): the bf16's low and high bytes
//            looked up with VPERMI2B, then interleaved: one load and 8 integer ops instead of four
//            loads and 10 conversions. Decode at one row, one thread (AMD EPYC Zen 5), 0.6b qkv and
//            gate_up shapes: high / medium 93–100 % against 85–91 % for Q8Widen.
// Each conversion yields two bf16 vectors (w0, w1) whose 32-bit lanes hold one column's inputs
// (2h, 2h + 1), h = 0, 1, and names the lane of each of the 16 columns' pair 0 in w0 ++ w1
// (Conv::pair0_lanes(); pair 1 is the next lane). x's quad is one 64-bit broadcast (pair 0 to the
// even lanes, pair 1 to the odd ones); a column's two lanes are added once, at the end, and scaled
// by its row scale. The conversions differ only in where a column's lanes sit, so both give the
// same bits. Included by ISA translation units only (each compiles it with its own flags), hence
// the anonymous namespace.
#include <immintrin.h>

#include <bit>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_tile_io.h"

namespace pypto::cpu::qbf16 {
namespace {

// Software prefetch distance into L1 along each weight stream. The hardware prefetchers stop at
// every 4 KiB page. For int8 at high 2 KiB measured best at one row (AMD EPYC Zen 5, 0.6b qkv and
// gate_up, alternating runs: high / medium median 93–100 % against 91–95 % at 3 KiB, 82–83 % at
// 4.5 KiB, 86–91 % at 1 KiB).
constexpr int64_t kQ8PrefetchBytes = 2048;

// w0 holds columns 0..7, lane 2c + h (VCVTNE2PS2BF16 of the f32 of inputs 0..15 and 16..31).
struct Q8Widen {
  static __m512i pair0_lanes() {
    return _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  }
  void convert(const uint8_t* b, __m512bh& w0, __m512bh& w1) const {
    __m512 f[4];
    for (int j = 0; j < 4; ++j)
      f[j] = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16 * j))));
    w0 = _mm512_cvtne2ps_pbh(f[1], f[0]);
    w1 = _mm512_cvtne2ps_pbh(f[3], f[2]);
  }
};

#ifdef __AVX512VBMI__
// The exact bf16 of an int8 q (bits s eeeeeeee mmmmmmm): the sign is q's; the rest depends on
// a = |q| ≤ 128 only. Low byte (e's last bit and the mantissa) from a table indexed by a mod 128
// (VPERMI2B reads 7 index bits; a = 128 has the low byte of a = 0, 0x00); high byte without the sign
// from a table indexed by a − 1 (q = 0 masked to 0x00). Tables from float(a), exact for a ≤ 128.
struct Q8LookupTables {
  alignas(64) uint8_t lo[128];  // [a]: low byte of bf16(a), a = 0 .. 127
  alignas(64) uint8_t hi[128];  // [a − 1]: high byte of bf16(a), a = 1 .. 128
};
constexpr uint16_t bf16_bits_of_small_int(int a) {
  return static_cast<uint16_t>(std::bit_cast<uint32_t>(static_cast<float>(a)) >> 16);
}
constexpr Q8LookupTables make_q8_lookup_tables() {
  Q8LookupTables t{};
  for (int a = 0; a < 128; ++a) t.lo[a] = static_cast<uint8_t>(bf16_bits_of_small_int(a) & 0xFF);
  for (int a = 1; a <= 128; ++a) t.hi[a - 1] = static_cast<uint8_t>(bf16_bits_of_small_int(a) >> 8);
  return t;
}
alignas(64) constexpr Q8LookupTables kQ8LookupTables = make_q8_lookup_tables();

// Low and high bytes interleaved per 128-bit lane (VPUNPCKLBW / VPUNPCKHBW): lane 4j + 2c + h of
// w0 holds column 4j + c (c = 0, 1), of w1 column 4j + 2 + c.
struct Q8Lookup {
  __m512i lo0 = _mm512_load_si512(kQ8LookupTables.lo), lo1 = _mm512_load_si512(kQ8LookupTables.lo + 64);
  __m512i hi0 = _mm512_load_si512(kQ8LookupTables.hi), hi1 = _mm512_load_si512(kQ8LookupTables.hi + 64);
  static __m512i pair0_lanes() {
    return _mm512_setr_epi32(0, 2, 16, 18, 4, 6, 20, 22, 8, 10, 24, 26, 12, 14, 28, 30);
  }
  void convert(const uint8_t* b, __m512bh& w0, __m512bh& w1) const {
    const __m512i q = _mm512_loadu_si512(b);
    const __m512i a = _mm512_abs_epi8(q);  // 0x80 for q = −128
    const __m512i lo = _mm512_permutex2var_epi8(lo0, a, lo1);
    const __m512i mag = _mm512_maskz_permutex2var_epi8(_mm512_test_epi8_mask(q, q), hi0,
                                                       _mm512_add_epi8(a, _mm512_set1_epi8(-1)), hi1);
    // (q & 0x80) | mag: ternary-logic 0xEA is (A & B) | C.
    const __m512i hi = _mm512_ternarylogic_epi32(q, _mm512_set1_epi8(static_cast<char>(0x80)), mag, 0xEA);
    w0 = (__m512bh)_mm512_unpacklo_epi8(lo, hi);
    w1 = (__m512bh)_mm512_unpackhi_epi8(lo, hi);
  }
};
#endif

// Rows [i0, i0 + R) × panels [p0, p0 + V): per column two f32 lanes, each summing its pairs in k
// order, hi then lo, added at the end: the same operations in the same order whatever R and V.
template <class Conv, int R, int V>
void q8_tile(const QuantLinearTask& t, int64_t i0, int64_t p0) {
  const int64_t quads = (t.k + 3) / 4, pstride = (t.k + 63) / 64 * 1024;
  const Conv conv;
  __m512 acc[R][V][2];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v][0] = acc[r][v][1] = _mm512_setzero_ps();
  const uint8_t* wp = t.w + p0 * pstride;
  for (int64_t q = 0; q < quads; ++q) {
    for (int v = 0; v < V; ++v) prefetch_l1(wp + v * pstride + q * 64 + kQ8PrefetchBytes);
    const int64_t off = (q >> 1) * 16 + (q & 1) * 4;
    for (int v = 0; v < V; ++v) {
      __m512bh w0, w1;
      conv.convert(wp + v * pstride + q * 64, w0, w1);
      for (int r = 0; r < R; ++r) {
        const uint16_t* xr = t.xp + (i0 + r) * t.ldp + off;
        int64_t h, l;
        std::memcpy(&h, xr, 8);
        std::memcpy(&l, xr + 8, 8);
        const __m512bh xh = (__m512bh)_mm512_set1_epi64(h), xl = (__m512bh)_mm512_set1_epi64(l);
        acc[r][v][0] = _mm512_dpbf16_ps(acc[r][v][0], xh, w0);
        acc[r][v][1] = _mm512_dpbf16_ps(acc[r][v][1], xh, w1);
        acc[r][v][0] = _mm512_dpbf16_ps(acc[r][v][0], xl, w0);
        acc[r][v][1] = _mm512_dpbf16_ps(acc[r][v][1], xl, w1);
      }
    }
  }
  const __m512i pair0 = Conv::pair0_lanes(), pair1 = _mm512_add_epi32(pair0, _mm512_set1_epi32(1));
  for (int v = 0; v < V; ++v) {
    const int64_t c0 = (p0 + v) * 16;
    if (c0 >= t.n_out) continue;
    const __m512 s = _mm512_loadu_ps(t.scale + c0);
    for (int r = 0; r < R; ++r) {
      const __m512 e = _mm512_permutex2var_ps(acc[r][v][0], pair0, acc[r][v][1]);
      const __m512 o = _mm512_permutex2var_ps(acc[r][v][0], pair1, acc[r][v][1]);
      store_out(t, i0 + r, c0, _mm512_mul_ps(_mm512_add_ps(e, o), s));
    }
  }
}

// Rows [i, i + R) over the v (≤ 4) panels from p: V panels per tile, at most 16 accumulators.
template <class Conv, int R, int V>
void q8_rows(const QuantLinearTask& t, int64_t i, int64_t p, int64_t v) {
  int64_t j = 0;
  for (; j + V <= v; j += V) q8_tile<Conv, R, V>(t, i, p + j);
  if constexpr (V > 1) {
    if (v - j >= 2) q8_tile<Conv, R, 2>(t, i, p + j), j += 2;
    if (v - j == 1) q8_tile<Conv, R, 1>(t, i, p + j);
  }
}

// Columns [n0, n1), n0 a multiple of 16: groups of 4 panels; rows 4 at a time over 2 panels, then
// the last 1–3 rows together (one row over 4 panels, two over 4, three over 2), so each weight is
// converted to bf16 once per 4 rows and a verify step's 2–3 rows or a small batch's cost little more
// than one (before, the last rows took one pass each: a 2-row step of the qwen3-14b shape cost
// 1.66x a 1-row step). Per output the same operations in the same order whatever the tile.
template <class Conv>
void linear_cols_q8_bf16(const QuantLinearTask& t, int64_t n0, int64_t n1) {
  const int64_t p0 = n0 / 16, p1 = (n1 + 15) / 16;
  for (int64_t p = p0; p < p1; p += 4) {
    const int64_t v = p1 - p < 4 ? p1 - p : 4;
    int64_t i = 0;
    for (; i + 4 <= t.m; i += 4) q8_rows<Conv, 4, 2>(t, i, p, v);
    switch (t.m - i) {
      case 3: q8_rows<Conv, 3, 2>(t, i, p, v); break;
      case 2: q8_rows<Conv, 2, 4>(t, i, p, v); break;
      case 1: q8_rows<Conv, 1, 4>(t, i, p, v); break;
      default: break;
    }
  }
}

}  // namespace
}  // namespace pypto::cpu::qbf16
