#pragma once
// What the AVX2 quantized-weight register tiles share (linear_quant_avx2.cpp, int8 activations;
// linear_quant_i16_avx2.cpp, int16 activations): the L1 prefetch along a weight stream, the
// broadcast of 4 activation bytes (4 int8 or 2 int16), the store of 8 output columns of one row
// (bias added). AVX2 translation units only, hence the anonymous namespace.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/kernel_table.h"

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

}  // namespace
}  // namespace pypto::cpu
