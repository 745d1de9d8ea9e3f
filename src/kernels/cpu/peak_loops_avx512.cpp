// Compute-peak loops (AVX-512 flags; called only when the CPU has AVX512_BF16): the kernel choice
// (cpu_backend.cpp) and the benchmarks' peaks. 16 independent
// accumulators hide the instruction latency so the loop is throughput-bound.
#include <immintrin.h>

#include "kernels/cpu/peak_loops.h"

namespace pypto::cpu {

int64_t bf16_dot_loop(int64_t iters) {
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80);  // 1.0 in bf16
  __m512bh y = (__m512bh)_mm512_set1_epi16(0x3c00);        // tiny, keeps sums finite
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_dpbf16_ps(acc[j], x, y);
    __asm__ volatile("" : "+v"(y));  // keep the loop from being folded
  }
  __m512 s = acc[0];
  for (int j = 1; j < 16; ++j) s = _mm512_add_ps(s, acc[j]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return iters * 16 * 32;  // 32 bf16 multiply-adds per instruction
}

int64_t f32_fma_loop(int64_t iters) {
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512 x = _mm512_set1_ps(1.0f);
  __m512 y = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
    for (int j = 0; j < 16; ++j) acc[j] = _mm512_fmadd_ps(x, y, acc[j]);
    __asm__ volatile("" : "+v"(y));
  }
  __m512 s = acc[0];
  for (int j = 1; j < 16; ++j) s = _mm512_add_ps(s, acc[j]);
  volatile float sink = _mm512_reduce_add_ps(s);
  (void)sink;
  return iters * 16 * 16;  // 16 f32 multiply-adds per instruction
}

}  // namespace pypto::cpu
