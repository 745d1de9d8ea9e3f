#include "core/kv_dtype.h"

#include "core/error.h"

namespace pypto {

DType parse_kv_cache_dtype(std::string_view s, const char* option) {
  if (s == "auto" || s == "bf16" || s == "bfloat16") return DType::BF16;
  if (s == "fp32" || s == "float32") return DType::F32;
  if (s == "int8") return DType::I8;
  if (s == "fp8" || s == "fp8_e4m3") return DType::F8_E4M3;
  if (s == "fp8_e5m2")
    fail(option, " fp8_e5m2 is not supported (only the E4M3 8-bit float); use fp8 (= fp8_e4m3) or int8");
  fail(option, " must be one of ", kKvCacheDtypeHelp, ", got '", s, "'");
}

const char* kv_cache_dtype_name(DType t) {
  switch (t) {
    case DType::BF16: return "bf16";
    case DType::F32: return "fp32";
    case DType::I8: return "int8";
    case DType::F8_E4M3: return "fp8_e4m3";
    default: return dtype_name(t);
  }
}

}  // namespace pypto
