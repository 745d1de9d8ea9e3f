#pragma once
// Throughput loops of the matrix instructions: one thread runs `iters` rounds of independent
// instructions (registers only, no memory) and returns the multiply-adds done. The benchmarks'
// peaks (bench/kernels/peaks.cpp) run them on every thread; the CPU backend times two of them once
// to choose its kernel (cpu_backend.cpp). Each needs its ISA: AVX512_BF16 / AMX (amx_usable()) /
// AVX2 + FMA.
#include <cstdint>

namespace pypto::cpu {

int64_t bf16_dot_loop(int64_t iters);  // VDPBF16PS zmm, 16 accumulators
int64_t f32_fma_loop(int64_t iters);   // VFMADD231PS zmm, 16 accumulators
int64_t f32_fma_loop_avx2(int64_t iters);  // VFMADD231PS ymm, 12 accumulators (AVX2 + FMA)
int64_t amx_bf16_loop(int64_t iters);  // TDPBF16PS, 4 accumulator tiles
int64_t amx_int8_loop(int64_t iters);  // TDPBUSD (u8 × s8), 4 accumulator tiles

}  // namespace pypto::cpu
