#include "core/dtype.h"

#include <cmath>

#include "core/error.h"

namespace pypto {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::F8_E4M3: return 1;
    case DType::I8: return 1;
  }
  PYPTO_ASSERT(false, "bad dtype");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::F16: return "F16";
    case DType::BF16: return "BF16";
    case DType::I32: return "I32";
    case DType::I64: return "I64";
    case DType::F8_E4M3: return "F8_E4M3";
    case DType::I8: return "I8";
  }
  PYPTO_ASSERT(false, "bad dtype");
}

bool dtype_parse(std::string_view s, DType* out) {
  if (s == "F32" || s == "float32" || s == "f32" || s == "fp32" || s == "float") *out = DType::F32;
  else if (s == "F16" || s == "float16" || s == "f16" || s == "fp16" || s == "half") *out = DType::F16;
  else if (s == "BF16" || s == "bfloat16" || s == "bf16") *out = DType::BF16;
  else if (s == "I32" || s == "int32") *out = DType::I32;
  else if (s == "I64" || s == "int64") *out = DType::I64;
  else if (s == "F8_E4M3" || s == "float8_e4m3fn") *out = DType::F8_E4M3;
  else if (s == "I8" || s == "int8") *out = DType::I8;
  else return false;
  return true;
}

float f16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { e++; man <<= 1; } while ((man & 0x400u) == 0);
      u = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (man & 0x3ffu) << 13;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | man << 13;
  } else {
    u = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    // value = man * 2^(e-150); half subnormal unit is 2^-24, so shift right by 126-e.
    uint32_t e = abs >> 23;
    uint32_t man = (abs & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;
    uint32_t out = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1);
    uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (out & 1u))) out++;
    return static_cast<uint16_t>(sign | out);
  }
  uint32_t out = ((abs - 0x38000000u) >> 13);
  uint32_t rem = abs & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (out & 1u))) out++;
  return static_cast<uint16_t>(sign | out);
}

uint8_t f32_to_e4m3(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7f;  // NaN
  if (abs >= 0x43e00000u) return sign | 0x7e;  // >= 448 (and inf): saturate
  if (abs < 0x3c800000u) {                     // below 2^-6: subnormal codes m · 2^-9, m = 0..8
    const float q = std::fabs(f) * 512.0f;  // exact: scaling by a power of two
    uint32_t m = static_cast<uint32_t>(q);
    const float frac = q - static_cast<float>(m);  // exact: q < 8
    if (frac > 0.5f || (frac == 0.5f && (m & 1u))) m++;
    return static_cast<uint8_t>(sign | m);  // m == 8 is 0x08, the smallest normal: still right
  }
  // Normal: rebias the exponent (127 -> 7) and keep 3 of 23 mantissa bits; a carry out of the
  // mantissa rolls into the exponent, which is the right rounding.
  uint32_t out = (abs - ((127u - 7u) << 23)) >> 20;
  const uint32_t rem = abs & 0xfffffu;
  if (rem > 0x80000u || (rem == 0x80000u && (out & 1u))) out++;  // |f| < 448 rounds to at most 0x7E
  return static_cast<uint8_t>(sign | out);
}

float load_as_f32(const void* data, DType t, size_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(data)[i];
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::I32: return static_cast<float>(static_cast<const int32_t*>(data)[i]);
    case DType::I64: return static_cast<float>(static_cast<const int64_t*>(data)[i]);
    case DType::F8_E4M3: return e4m3_to_f32(static_cast<const uint8_t*>(data)[i]);
    case DType::I8: return static_cast<float>(static_cast<const int8_t*>(data)[i]);
  }
  PYPTO_ASSERT(false, "bad dtype");
}

}  // namespace pypto
