#pragma once
// The `quantization_config` of a pre-quantized checkpoint's config.json. Two methods are served:
//   fp8 (Qwen / DeepSeek block FP8): the seven projections of every layer are F8_E4M3 with a
//       multiplicative scale per block of block_n output rows × block_k input columns,
//       `<proj>.weight_scale_inv` [ceil(out / block_n), ceil(in / block_k)] (bf16, f16 or f32);
//       w = e4m3 · scale. Embeddings, lm_head and norms stay in the checkpoint's float dtype.
//   awq (AutoAWQ "gemm", 4 bits, zero points): `<proj>.qweight` int32 [in, out / 8],
//       `<proj>.qzeros` int32 [in / group, out / 8], `<proj>.scales` f16 [in / group, out];
//       nibble slot s (bits 4s..4s+3) of a packed int32 holds column 8j + kAwqOrder[s];
//       w = (q − z) · scale.
// Anything else is refused at parse time naming the method found and the supported ones.
#include <cstdint>
#include <string>

namespace pypto {

enum class QuantMethod { None, Fp8, Awq };
const char* quant_method_name(QuantMethod m);  // "none" | "fp8" | "awq"

// Slot s of an AWQ packed int32 holds column 8j + kAwqOrder[s] of its group of 8.
inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

struct QuantConfig {
  QuantMethod method = QuantMethod::None;
  int32_t fp8_block_n = 128, fp8_block_k = 128;  // weight_block_size [n, k]
  int32_t awq_bits = 4, awq_group = 128;
  bool awq_zero_point = true;
};

}  // namespace pypto
