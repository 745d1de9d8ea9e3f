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
//   gptq (AutoGPTQ / GPTQModel, as Qwen/Qwen3-*-GPTQ-Int4): `<proj>.qweight` int32 [in / 8, out]
//       packed along the INPUT dimension (nibble s of word [r][n] is input row 8r + s),
//       `<proj>.qzeros` int32 [in / group, out / 8] packed along the OUTPUT dimension (nibble s of
//       word [g][j] is output column 8j + s), `<proj>.scales` f16 [in / group, out], `<proj>.g_idx`
//       int32 [in] (the group of each input row); w[n][k] = (q − z) · scale with z = stored + 1 in
//       the v1 convention (checkpoint_format "gptq" or absent: the tools store zero − 1) and
//       z = stored for "gptq_v2". Served: 4 bits and g_idx[k] = k / group (no act-order reordering).
// Anything else is refused at parse time naming the method found and the supported ones.
// Fields as Qwen/Qwen3-*-FP8 and Qwen/Qwen3-*-AWQ write them (and transformers' FineGrainedFP8Config
// / AwqConfig read them):
//   {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}
//   {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true, "version": "gemm",
//    "modules_to_not_convert": null}
//   {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": false, "sym": true,
//    "checkpoint_format": "gptq", "damp_percent": 0.01, "static_groups": false, "true_sequential": true}
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace pypto {

enum class QuantMethod { None, Fp8, Awq, Gptq };
const char* quant_method_name(QuantMethod m);  // "none" | "fp8" | "awq" | "gptq"

// Slot s of an AWQ packed int32 holds column 8j + kAwqOrder[s] of its group of 8.
inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

struct QuantConfig {
  QuantMethod method = QuantMethod::None;
  int32_t fp8_block_n = 128, fp8_block_k = 128;  // weight_block_size [n, k]
  int32_t awq_bits = 4, awq_group = 128;
  bool awq_zero_point = true;
  // GPTQ: bits (4), group_size, sym (informational: the zeros are read from qzeros either way),
  // desc_act (act-order: allowed only while g_idx stays k / group, checked per tensor), and the
  // zero-point convention: true for checkpoint_format "gptq" (v1, stored = zero − 1).
  int32_t gptq_bits = 4, gptq_group = 128;
  bool gptq_sym = true, gptq_desc_act = false, gptq_v1_zeros = true;
  // The group size of the 4-bit formats (awq_group or gptq_group).
  int32_t int4_group() const { return method == QuantMethod::Gptq ? gptq_group : awq_group; }
};

// Parses config.json's `quantization_config` object (`path` names the file in messages). Absent
// fields take transformers' defaults (fp8: fmt e4m3, dynamic activations; awq: 4 bits, group 128,
// zero points, gemm; gptq: 4 bits, group 128, sym, no desc_act, checkpoint_format "gptq"); a present
// field with a value we do not serve is an Error naming the field, the value and what is supported,
// as is any quant_method other than fp8, awq and gptq.
QuantConfig parse_quant_config(const nlohmann::json& q, const std::string& path);

}  // namespace pypto
