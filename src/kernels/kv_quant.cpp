#include "kernels/kv_quant.h"

#include <cmath>

#include "core/error.h"

namespace pypto {

void kv_quantize_row(const float* x, int32_t n, DType dtype, void* dst, float* scale) {
  PYPTO_ASSERT(dtype == DType::I8 || dtype == DType::F8_E4M3, "kv_quantize_row: 8-bit dtype, got ",
               dtype_name(dtype));
  float amax = 0.0f;
  bool finite = true;
  for (int32_t e = 0; e < n; ++e) {
    const float a = std::fabs(x[e]);
    if (!(a <= 3.4028235e38f)) finite = false;  // inf or NaN
    amax = a > amax ? a : amax;
  }
  const float qmax = dtype == DType::I8 ? 127.0f : 448.0f;
  if (!finite) {
    *scale = NAN;
    for (int32_t e = 0; e < n; ++e) static_cast<uint8_t*>(dst)[e] = 0;
    return;
  }
  // amax so small that qmax / amax overflows (below ~1e-36): stored as zeros, as amax == 0.
  if (amax == 0.0f || !(qmax / amax <= 3.4028235e38f)) {
    *scale = 0.0f;
    for (int32_t e = 0; e < n; ++e) static_cast<uint8_t*>(dst)[e] = 0;
    return;
  }
  *scale = amax / qmax;
  const float inv = qmax / amax;
  if (dtype == DType::I8) {
    int8_t* q = static_cast<int8_t*>(dst);
    for (int32_t e = 0; e < n; ++e) {
      float r = std::nearbyint(x[e] * inv);  // round half to even (default rounding mode)
      r = r > 127.0f ? 127.0f : (r < -127.0f ? -127.0f : r);
      q[e] = static_cast<int8_t>(r);
    }
  } else {
    uint8_t* q = static_cast<uint8_t*>(dst);
    for (int32_t e = 0; e < n; ++e) q[e] = f32_to_e4m3(x[e] * inv);
  }
}

}  // namespace pypto
