#pragma once
// Vector reads of the 8-bit KV cache rows (kernels/kv_quant.h): kLanes codes widened to f32 and
// multiplied by the row's scale in registers, bit-identical to kv_dequant() (the code is exact in
// f32, then one rounding in the multiply). Include after simd.h, in the ISA namespace.
//
// E4M3 decode without tables or denormal hazards: the code's magnitude bits shifted left by 7
// are an IEEE half (5 exponent bits, bias 15) whose value is the E4M3 value · 2^-8 — the 4-bit
// exponent (bias 7) lands in the half's exponent field, the 3 mantissa bits at its top, and E4M3
// subnormals m · 2^-9 become half subnormals m · 2^-17 — and VCVTPH2PS widens a half exactly,
// subnormals included. The factor 2^8 is folded into the scale (256 · scale is exact), so
// x̂ = half(code) · (256 · scale) rounds once, as code · scale does. The NaN code 0x7F would read
// as 480 here; kv_quantize_row never writes it (a non-finite row gets a NaN scale instead).
#include "kernels/cpu/simd.h"

namespace pypto::cpu::PYPTO_ISA_NS {

// The half's bits from the code sign-extended to 16 bits and shifted left by 7: the magnitude
// bits land in 7..13, copies of the sign in 14 and 15; this mask keeps the sign in 15 and clears
// 14: three integer operations per vector instead of the six of masking sign and magnitude
// apart.
constexpr short kHalfOfE4m3Mask = static_cast<short>(0xBF80);

#if defined(__AVX512F__)
inline vf load_kv_i8(const int8_t* p, vf scale) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), scale);
}
// scale256 = 256 · the row's scale.
inline vf load_kv_e4m3(const uint8_t* p, vf scale256) {
  const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i h = _mm256_and_si256(_mm256_slli_epi16(w, 7), _mm256_set1_epi16(kHalfOfE4m3Mask));
  return _mm512_mul_ps(_mm512_cvtph_ps(h), scale256);
}
#else
inline vf load_kv_i8(const int8_t* p, vf scale) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), scale);
}
inline vf load_kv_e4m3(const uint8_t* p, vf scale256) {
  const __m128i w = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m128i h = _mm_and_si128(_mm_slli_epi16(w, 7), _mm_set1_epi16(kHalfOfE4m3Mask));
  return _mm256_mul_ps(_mm256_cvtph_ps(h), scale256);
}
#endif

// kLanes dequantized values of an 8-bit row (I8 or F8_E4M3) from codes p, scale s of the row.
inline vf load_kv8(const uint8_t* p, bool is_int8, float s) {
  return is_int8 ? load_kv_i8(reinterpret_cast<const int8_t*>(p), vset1(s)) : load_kv_e4m3(p, vset1(s * 256.0f));
}
// The first n (< kLanes) of them, zeros elsewhere; reads no byte past p + n.
inline vf load_kv8_n(const uint8_t* p, int n, bool is_int8, float s) {
  alignas(16) uint8_t tmp[16] = {};
  std::memcpy(tmp, p, static_cast<size_t>(n));
  return load_kv8(tmp, is_int8, s);
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
