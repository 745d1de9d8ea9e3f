#pragma once
// Thin SIMD wrappers so each kernel is written once and compiled twice: by the *_avx512.cpp files
// (16 f32 lanes, zmm) and by the *_avx2.cpp files (8 f32 lanes, ymm). Include this header only
// from those files, after defining PYPTO_ISA_NS (avx512 or avx2): everything here and in the
// *_impl.h kernel headers lives in namespace pypto::cpu::PYPTO_ISA_NS, so the two compilations of
// an inline function never share a symbol (which would let the linker hand AVX-512 code to an
// AVX2-only machine).
//
// Reduction order matters for batch invariance: every dot product in the kernels is "lane l sums
// elements l, l+L, l+2L, ... with FMA, then hsum() adds the lanes in one fixed tree", and every
// caller (GEMV or GEMM, one query or many) uses exactly these functions.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#ifndef PYPTO_ISA_NS
#error "define PYPTO_ISA_NS (avx512 or avx2) before including kernels/cpu/simd.h"
#endif

namespace pypto::cpu::PYPTO_ISA_NS {

#if defined(__AVX512F__)
constexpr int kLanes = 16;
using vf = __m512;
using vi = __m512i;

inline vf vzero() { return _mm512_setzero_ps(); }
inline vf vset1(float a) { return _mm512_set1_ps(a); }
inline vf vload(const float* p) { return _mm512_loadu_ps(p); }
inline void vstore(float* p, vf v) { _mm512_storeu_ps(p, v); }
inline __mmask16 tail_mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
// Loads the first n (< kLanes) elements, zeros elsewhere; never touches memory past p + n.
inline vf vload_n(const float* p, int n) { return _mm512_maskz_loadu_ps(tail_mask(n), p); }
inline void vstore_n(float* p, vf v, int n) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }
inline vf vadd(vf a, vf b) { return _mm512_add_ps(a, b); }
inline vf vsub(vf a, vf b) { return _mm512_sub_ps(a, b); }
inline vf vmul(vf a, vf b) { return _mm512_mul_ps(a, b); }
inline vf vdiv(vf a, vf b) { return _mm512_div_ps(a, b); }
inline vf vmax(vf a, vf b) { return _mm512_max_ps(a, b); }
inline vf vmin(vf a, vf b) { return _mm512_min_ps(a, b); }
inline vf vfma(vf a, vf b, vf c) { return _mm512_fmadd_ps(a, b, c); }   // a*b + c, one rounding
inline vf vfnma(vf a, vf b, vf c) { return _mm512_fnmadd_ps(a, b, c); } // c - a*b, one rounding
inline vf vround(vf a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
// Lanes where a < b get `x`, others keep `y`.
inline vf vselect_lt(vf a, vf b, vf x, vf y) { return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), y, x); }
// 2^n for integral-valued n in [-126, 127], built directly in the exponent field.
inline vf vexp2i(vf n) {
  vi e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
  return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
}

// Fixed tree: (l, l+8) -> (l, l+4) -> (l, l+2) -> (l, l+1).
inline float hsum(vf v) {
  __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}
// out[j] = hsum(v[j]) for 8 vectors, bit for bit: the same pairings in the same order —
// (l, l+8), then (l, l+4), then (l, l+2), then (l, l+1) — done on 8 vectors at once by shuffling
// them together (24 instructions instead of ~56). The GEMM tiles use it to store their results.
inline void hsum8(const vf (&v)[8], float* out) {
  vf t[4];  // t[p] = [v[2p] halves added | v[2p+1] halves added]  (l, l+8)
  for (int p = 0; p < 4; ++p)
    t[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  vf u[2];  // 128-bit group g of u[r] = the 4 partial sums of v[4r + g]  (l, l+4)
  for (int r = 0; r < 2; ++r)
    u[r] = _mm512_add_ps(_mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(t[2 * r], t[2 * r + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  // group g: [v[g] (0+2), v[g] (1+3), v[4+g] (0+2), v[4+g] (1+3)]  (l, l+2)
  const vf w = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(u[0]), _mm512_castps_pd(u[1]))),
                             _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(u[0]), _mm512_castps_pd(u[1]))));
  const vf z = _mm512_add_ps(w, _mm512_movehdup_ps(w));  // even lanes: (0+2) + (1+3)
  // v[g] sits in lane 4g, v[4+g] in lane 4g + 2.
  const __m512i idx = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  _mm256_storeu_ps(out, _mm512_castps512_ps256(_mm512_permutexvar_ps(idx, z)));
}
// out[j] = sum of the lanes of v[j], for kLanes vectors at once (a transpose-and-add, ~3x fewer
// instructions than kLanes hsum() calls). Each out[j] only ever adds lanes of v[j], in the same
// tree for every j: (l, l+2) within each 128-bit group, then (0+2)+(1+3), then groups (0+1) and
// (2+3), then their sum.
inline vf reduce_lanes(const vf (&v)[16]) {
  vf r[8];
  for (int i = 0; i < 8; ++i)
    r[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  vf q[4];
  for (int i = 0; i < 4; ++i)
    q[i] = _mm512_add_ps(_mm512_shuffle_ps(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  vf u[2];
  for (int i = 0; i < 2; ++i)
    u[i] = _mm512_add_ps(_mm512_shuffle_f32x4(q[2 * i], q[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(q[2 * i], q[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

inline float hmax(vf v) {  // max is exact: the order is irrelevant
  __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  b = _mm_max_ps(b, _mm_movehl_ps(b, b));
  b = _mm_max_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

// bf16 / f16 -> f32 (exact widening).
inline vf load_bf16(const uint16_t* p) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline vf load_bf16_n(const uint16_t* p, int n) {
  __m256i h = _mm256_maskz_loadu_epi16(tail_mask(n), p);
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
inline vf load_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline vf load_f16_n(const uint16_t* p, int n) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(n), p)); }

// f32 -> bf16 with round-to-nearest-even and quiet NaNs, bit-identical to f32_to_bf16() in
// core/dtype.h (VCVTNEPS2BF16 would flush denormals, so the integer form is used).
inline __m256i to_bf16_bits(vf v) {
  vi u = _mm512_castps_si512(v);
  vi lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  vi r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), lsb)), 16);
  vi nan_bits = _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40));
  __mmask16 is_nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                             _mm512_set1_epi32(0x7f800000));
  return _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, r, nan_bits));
}
inline void store_bf16(uint16_t* p, vf v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), to_bf16_bits(v)); }
inline void store_bf16_n(uint16_t* p, vf v, int n) { _mm256_mask_storeu_epi16(p, tail_mask(n), to_bf16_bits(v)); }

#elif defined(__AVX2__)
constexpr int kLanes = 8;
using vf = __m256;
using vi = __m256i;

inline vf vzero() { return _mm256_setzero_ps(); }
inline vf vset1(float a) { return _mm256_set1_ps(a); }
inline vf vload(const float* p) { return _mm256_loadu_ps(p); }
inline void vstore(float* p, vf v) { _mm256_storeu_ps(p, v); }
inline __m256i tail_mask(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
inline vf vload_n(const float* p, int n) { return _mm256_maskload_ps(p, tail_mask(n)); }
inline void vstore_n(float* p, vf v, int n) { _mm256_maskstore_ps(p, tail_mask(n), v); }
inline vf vadd(vf a, vf b) { return _mm256_add_ps(a, b); }
inline vf vsub(vf a, vf b) { return _mm256_sub_ps(a, b); }
inline vf vmul(vf a, vf b) { return _mm256_mul_ps(a, b); }
inline vf vdiv(vf a, vf b) { return _mm256_div_ps(a, b); }
inline vf vmax(vf a, vf b) { return _mm256_max_ps(a, b); }
inline vf vmin(vf a, vf b) { return _mm256_min_ps(a, b); }
inline vf vfma(vf a, vf b, vf c) { return _mm256_fmadd_ps(a, b, c); }
inline vf vfnma(vf a, vf b, vf c) { return _mm256_fnmadd_ps(a, b, c); }
inline vf vround(vf a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline vf vselect_lt(vf a, vf b, vf x, vf y) { return _mm256_blendv_ps(y, x, _mm256_cmp_ps(a, b, _CMP_LT_OQ)); }
inline vf vexp2i(vf n) {
  vi e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
}

// Fixed tree: (l, l+4) -> (l, l+2) -> (l, l+1).
inline float hsum(vf v) {
  __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_add_ps(b, _mm_movehl_ps(b, b));
  b = _mm_add_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}
// out[j] = hsum(v[j]) for 8 vectors (the AVX-512 build shuffles them together; here one by one).
inline void hsum8(const vf (&v)[8], float* out) {
  for (int j = 0; j < 8; ++j) out[j] = hsum(v[j]);
}
// out[j] = sum of the lanes of v[j] for 8 vectors at once; the same fixed tree for every j.
inline vf reduce_lanes(const vf (&v)[8]) {
  vf r[4];
  for (int i = 0; i < 4; ++i)
    r[i] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  vf q[2];
  for (int i = 0; i < 2; ++i)
    q[i] = _mm256_add_ps(_mm256_shuffle_ps(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(r[2 * i], r[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm256_add_ps(_mm256_permute2f128_ps(q[0], q[1], 0x20), _mm256_permute2f128_ps(q[0], q[1], 0x31));
}

inline float hmax(vf v) {
  __m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  b = _mm_max_ps(b, _mm_movehl_ps(b, b));
  b = _mm_max_ss(b, _mm_movehdup_ps(b));
  return _mm_cvtss_f32(b);
}

inline __m128i load_u16x8_n(const uint16_t* p, int n) {
  alignas(16) uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(tmp, p, static_cast<size_t>(n) * 2);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
}
inline vf load_bf16(const uint16_t* p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline vf load_bf16_n(const uint16_t* p, int n) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(load_u16x8_n(p, n)), 16));
}
inline vf load_f16(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline vf load_f16_n(const uint16_t* p, int n) { return _mm256_cvtph_ps(load_u16x8_n(p, n)); }
// One run of kLanes bf16 pairs (bf16_panels.h: lane c holds W[c][2q] in its low half and
// W[c][2q + 1] in its high half) widened exactly to f32: even = the low halves, odd = the high
// (linear_bf16_panels_f32_impl.h; AVX-512 reads the pairs with VDPBF16PS or AMX instead).
inline void load_bf16_pairs(const uint16_t* p, vf& even, vf& odd) {
  const vi v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  even = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  odd = _mm256_castsi256_ps(_mm256_and_si256(v, _mm256_set1_epi32(static_cast<int>(0xffff0000u))));
}

inline __m128i to_bf16_bits(vf v) {
  vi u = _mm256_castps_si256(v);
  vi lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
  vi r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb)), 16);
  vi nan_bits = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
  vi is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  vi bits = _mm256_blendv_epi8(r, nan_bits, is_nan);  // each lane now holds a 16-bit value
  vi packed = _mm256_packus_epi32(bits, bits);        // per 128-bit half: [a0..a3 a0..a3]
  packed = _mm256_permute4x64_epi64(packed, 0x08);   // [half0 lo 64 | half1 lo 64 | ...]
  return _mm256_castsi256_si128(packed);
}
inline void store_bf16(uint16_t* p, vf v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), to_bf16_bits(v)); }
inline void store_bf16_n(uint16_t* p, vf v, int n) {
  alignas(16) uint16_t tmp[8];
  _mm_store_si128(reinterpret_cast<__m128i*>(tmp), to_bf16_bits(v));
  std::memcpy(p, tmp, static_cast<size_t>(n) * 2);
}
#else
#error "kernels/cpu/simd.h needs -mavx512f... or -mavx2 -mfma -mf16c"
#endif

// e^x, |relative error| < ~2 ulp for x in [-87.3, 88.3]; 0 below (including -inf), so a
// masked-out score (-inf) gets probability exactly 0. Range reduction x = n ln2 + r, |r| <= ln2/2,
// e^r by its degree-6 Taylor polynomial, then scaling by 2^n through the exponent bits.
inline vf vexp(vf x) {
  const vf lo = vset1(-87.3f);
  vf xc = vmin(vmax(x, lo), vset1(88.3f));
  vf n = vround(vmul(xc, vset1(1.44269504088896341f)));
  vf r = vfnma(n, vset1(0.693145751953125f), xc);    // ln2 split: hi part exact in f32 ...
  r = vfnma(n, vset1(1.428606765330187045e-06f), r);   // ... plus the rest
  vf p = vset1(1.0f / 720);
  p = vfma(p, r, vset1(1.0f / 120));
  p = vfma(p, r, vset1(1.0f / 24));
  p = vfma(p, r, vset1(1.0f / 6));
  p = vfma(p, r, vset1(0.5f));
  p = vfma(p, r, vset1(1.0f));
  p = vfma(p, r, vset1(1.0f));
  vf y = vmul(p, vexp2i(n));
  return vselect_lt(x, lo, vzero(), y);
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
