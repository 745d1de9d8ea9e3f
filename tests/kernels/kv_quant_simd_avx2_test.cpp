// kv_quant_simd.h under AVX2 (this file gets the AVX2 flags; skips on other CPUs).
#define PYPTO_ISA_NS avx2
#define PYPTO_KVQ_SUITE KvQuantSimdAvx2
#include "kv_quant_simd_test.inc"
