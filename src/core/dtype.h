#pragma once
// Element types of weights, activations and the KV cache, and scalar conversions between them.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace pypto {

// F8_E4M3 is OCP FP8 E4M3FN (torch.float8_e4m3fn), the element type of block-FP8 checkpoints and
// of the fp8 KV cache; I8 (signed) is the element type of the int8 KV cache (kernels/kv_quant.h).
enum class DType : uint8_t { F32, F16, BF16, I32, I64, F8_E4M3, I8 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "F32", "F16", "BF16", ... (safetensors spelling)
// Parses safetensors ("BF16") and config ("bfloat16", "bf16") spellings; false if unknown.
bool dtype_parse(std::string_view s, DType* out);

// bf16 is the top half of an f32. Round-to-nearest-even, NaN kept quiet (as torch does).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// IEEE half <-> f32 (round-to-nearest-even), portable scalar versions.
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

// OCP FP8 E4M3FN: 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities, S.1111.111 is NaN,
// so the largest finite value is 448 (0x7E); exponent 0 holds subnormals m · 2^-9. Every code
// is exactly an f32 (and a bf16), so decoding is exact.
inline float e4m3_to_f32(uint8_t b) {
  const uint32_t sign = static_cast<uint32_t>(b & 0x80u) << 24;
  const uint32_t exp = (b >> 3) & 0xfu, man = b & 7u;
  float f;
  if (exp == 0xfu && man == 7u) {
    const uint32_t u = sign | 0x7fc00000u;  // quiet NaN, sign kept
    std::memcpy(&f, &u, 4);
  } else if (exp == 0) {
    f = static_cast<float>(man) * (1.0f / 512.0f);  // m · 2^-9, exact
    if (sign) f = -f;
  } else {
    const uint32_t u = sign | (exp + 127 - 7) << 23 | man << 20;
    std::memcpy(&f, &u, 4);
  }
  return f;
}
// f32 -> E4M3FN, round-to-nearest-even, saturating: finite values beyond 448 and ±inf give ±448
// (as CUDA's __NV_SATFINITE), NaN gives 0x7F with the sign.
uint8_t f32_to_e4m3(float f);

// Read element i of a buffer of type t as f32 (for reference code and tests, not hot loops).
float load_as_f32(const void* data, DType t, size_t i);

}  // namespace pypto
