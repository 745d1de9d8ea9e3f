#pragma once
// Element types of the KV cache (--kv-cache-dtype) and what one cached row costs in memory.
//   bf16 / fp32: the values themselves.
//   int8 (DType::I8) / fp8 (DType::F8_E4M3): 8-bit codes plus one f32 scale per (token, KV head)
//     row, for K and for V separately (kernels/kv_quant.h defines the formats).
#include <cstdint>
#include <string_view>

#include "core/dtype.h"

namespace pypto {

// The --kv-cache-dtype values, vLLM's spelling first: auto (= bf16), bf16, bfloat16, fp32,
// float32, int8, fp8, fp8_e4m3 (fp8 is E4M3, as in vLLM on most devices).
inline constexpr const char* kKvCacheDtypeNames[] = {"auto",  "bf16", "bfloat16", "fp32",
                                                     "float32", "int8", "fp8",      "fp8_e4m3"};
inline constexpr const char* kKvCacheDtypeHelp = "auto | bf16 | fp32 | int8 | fp8 (= fp8_e4m3)";

// Parses a --kv-cache-dtype value; throws Error naming `option` and the allowed values otherwise
// (fp8_e5m2, vLLM's other 8-bit format, is refused by name).
DType parse_kv_cache_dtype(std::string_view s, const char* option = "--kv-cache-dtype");
// "bf16" | "fp32" | "int8" | "fp8_e4m3" (log lines).
const char* kv_cache_dtype_name(DType t);

// True for the 8-bit formats, which carry a per-row scale.
inline bool kv_dtype_is_8bit(DType t) { return t == DType::I8 || t == DType::F8_E4M3; }
// True for every dtype the KV cache can hold.
inline bool kv_dtype_supported(DType t) {
  return t == DType::BF16 || t == DType::F32 || kv_dtype_is_8bit(t);
}

// Bytes one (token, KV head) row of K (or of V) costs: head_dim elements, plus the f32 scale of an
// 8-bit row. The pool size arithmetic (kv_bytes_per_block, KvCacheSpec) is built on this.
inline int64_t kv_row_bytes(DType t, int32_t head_dim) {
  return int64_t(head_dim) * int64_t(dtype_size(t)) + (kv_dtype_is_8bit(t) ? int64_t(sizeof(float)) : 0);
}

}  // namespace pypto
