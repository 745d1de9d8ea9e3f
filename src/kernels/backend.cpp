// Backend defaults shared by every backend.
#include "kernels/backend.h"

#include "core/error.h"

namespace pypto {

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::Float: return "float";
    case WeightFormat::Int8: return "int8";
    case WeightFormat::Int4: return "int4";
    case WeightFormat::Fp8: return "fp8";
  }
  return "?";
}

size_t Backend::packed_quantized_bytes(WeightFormat format, int64_t, int64_t, int32_t) const {
  fail("backend ", name(), " has no kernels for ", weight_format_name(format), " weights");
}

void Backend::pack_quantized(const QuantizedWeight& src, void*, int64_t, int64_t) const {
  fail("backend ", name(), " has no kernels for ", weight_format_name(src.format), " weights");
}

size_t linear_weight_bytes(const Backend& backend, const LinearWeight& w) {
  if (w.format != WeightFormat::Float) return backend.packed_quantized_bytes(w.format, w.n_out, w.k_in, w.group);
  return backend.packed_weight_bytes(w.dtype, w.n_out, w.k_in);
}

}  // namespace pypto
