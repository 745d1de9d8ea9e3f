#pragma once
// Element types of weights, activations and the KV cache, and scalar conversions between them.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace pypto {

enum class DType : uint8_t { F32, F16, BF16, I32, I64 };

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

// OCP FP8 E4M3 (e4m3fn: bias 7, no infinities, S.1111.111 is NaN) -> f32, exact.
float e4m3_to_f32(uint8_t b);

// Read element i of a buffer of type t as f32 (for reference code and tests, not hot loops).
float load_as_f32(const void* data, DType t, size_t i);

}  // namespace pypto
