// kv_quant_simd.h under AVX-512 (this file gets the AVX-512 flags; skips on other CPUs).
#define PYPTO_ISA_NS avx512
#define PYPTO_KVQ_SUITE KvQuantSimdAvx512
#include "kv_quant_simd_test.inc"
