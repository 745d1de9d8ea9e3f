#pragma once
// Small helpers shared by the reference and optimised CPU backends (ISA-neutral code only: this
// header must not be included from the *_avx512.cpp / *_avx2.cpp files, whose inline functions
// would otherwise be compiled with vector flags and could be picked by the linker for everyone).
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"

namespace pypto {

// Bytes of a plain row-major [n_out, k_in] weight, rounded up to a 64-byte multiple.
inline size_t plain_weight_bytes(DType dtype, int64_t n_out, int64_t k_in) {
  size_t b = static_cast<size_t>(n_out) * static_cast<size_t>(k_in) * dtype_size(dtype);
  return (b + 63) / 64 * 64;
}

inline void check_weight_dtype(DType t) {
  if (t != DType::BF16 && t != DType::F16 && t != DType::F32)
    fail("linear/embedding weights must be bf16, f16 or f32, got ", dtype_name(t));
}
inline void check_kv_dtype(DType t) {
  if (t != DType::BF16 && t != DType::F32 && t != DType::I8 && t != DType::F8_E4M3)
    fail("KV cache dtype must be bf16, f32, int8 or fp8 (e4m3), got ", dtype_name(t));
}

}  // namespace pypto
