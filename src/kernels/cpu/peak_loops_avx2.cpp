// The f32 FMA peak loop on AVX2 + FMA (ymm), for CPUs without AVX-512: the benchmarks' matrix peak
// there (bench/kernels/peaks.cpp). 12 independent accumulators cover the FMA latency × ports.
#include <immintrin.h>

#include "kernels/cpu/peak_loops.h"

namespace pypto::cpu {

int64_t f32_fma_loop_avx2(int64_t iters) {
  __m256 acc[12];
  for (auto& a : acc) a = _mm256_setzero_ps();
  const __m256 x = _mm256_set1_ps(1.0f);
  __m256 y = _mm256_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < 12; ++j) acc[j] = _mm256_fmadd_ps(x, y, acc[j]);
    __asm__ volatile("" : "+x"(y));  // keep the loop from being folded
  }
  __m256 s = acc[0];
  for (int j = 1; j < 12; ++j) s = _mm256_add_ps(s, acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  volatile float sink = lanes[0];
  (void)sink;
  return iters * 12 * 8;  // 8 f32 multiply-adds per instruction
}

}  // namespace pypto::cpu
