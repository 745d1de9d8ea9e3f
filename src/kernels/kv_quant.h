#pragma once
// The 8-bit KV cache formats (--kv-cache-dtype int8 | fp8): one f32 scale per (token, KV head)
// row of head_dim elements, for K and for V separately, chosen from that row alone when it is
// written (kv_store), so a row's codes never depend on other tokens, on chunking or on batching.
//
//   int8 (DType::I8): symmetric. amax = max_e |x[e]|, scale = amax / 127,
//     q[e] = clamp(round_half_even(x[e] · (127 / amax)), -127, 127), x̂[e] = q[e] · scale.
//     -128 is never written, so the code range is symmetric and 0 is exact.
//   fp8 (DType::F8_E4M3, OCP E4M3FN): scale = amax / 448, the row's max |x| maps onto 448, the
//     largest finite E4M3 value, so the row uses the format's whole range (3 mantissa bits:
//     relative step 2^-4 near every magnitude above 2^-6 · scale);
//     q[e] = f32_to_e4m3(x[e] · (448 / amax)) (round to nearest even, saturating at ±448 for a
//     product that rounds just past it), x̂[e] = e4m3_to_f32(q[e]) · scale.
//   A row of zeros (or of max |x| below ~1e-36) gets scale 0 and codes 0 (x̂ = 0). A row holding inf or NaN gets a NaN scale:
//     the whole row reads back NaN, so the fault shows in the output as it would in bf16.
//
// The attention kernels read the codes and the scale and dequantize in registers
// (x̂ = code · scale in f32, one rounding, as kv_dequant below): the same f32 values every
// kernel (reference, AVX-512, AVX2) attends over.
#include <cstdint>

#include "core/dtype.h"

namespace pypto {

// Quantizes one row x[0, n) into dst (n codes of `dtype`, I8 or F8_E4M3) and *scale.
void kv_quantize_row(const float* x, int32_t n, DType dtype, void* dst, float* scale);

// One token's K and V rows of one KV head written into an 8-bit cache layer (KvCacheLayer of
// kernels/backend.h: codes at element `row`, one byte each, and the rows' scales at
// scale_index(block, head, offset)), both backends' kv_store for the 8-bit dtypes.
template <typename Layer>
void kv_quantize_kv_rows(const float* k, const float* v, int32_t hd, const Layer& cache, int64_t row, int64_t si) {
  kv_quantize_row(k, hd, cache.dtype, static_cast<uint8_t*>(cache.k) + row, cache.k_scale + si);
  kv_quantize_row(v, hd, cache.dtype, static_cast<uint8_t*>(cache.v) + row, cache.v_scale + si);
}

// The value code i of an 8-bit row stands for (scalar; the kernels do the same in vectors).
inline float kv_dequant(const void* codes, DType dtype, int64_t i, float scale) {
  const float c = dtype == DType::I8 ? static_cast<float>(static_cast<const int8_t*>(codes)[i])
                                     : e4m3_to_f32(static_cast<const uint8_t*>(codes)[i]);
  return c * scale;
}

}  // namespace pypto
