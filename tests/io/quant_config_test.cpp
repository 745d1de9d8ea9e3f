// config.json's quantization_config: the fields Qwen's FP8, AWQ and GPTQ-Int4 releases write parse into
// ModelConfig::quant; every other method or unsupported value is refused naming the file, the
// field, the value found and what is supported.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "io/model_config.h"

using namespace pypto;

namespace {

// qwen3-14b's config.json fields plus `quant` as its quantization_config.
std::string config_with(const nlohmann::json& quant) {
  nlohmann::json j = {{"architectures", {"Qwen3ForCausalLM"}},
                      {"vocab_size", 151936},
                      {"hidden_size", 5120},
                      {"intermediate_size", 17408},
                      {"num_hidden_layers", 40},
                      {"num_attention_heads", 40},
                      {"num_key_value_heads", 8},
                      {"head_dim", 128},
                      {"rms_norm_eps", 1e-6},
                      {"rope_theta", 1000000},
                      {"max_position_embeddings", 40960}};
  if (!quant.is_discarded()) j["quantization_config"] = quant;
  return j.dump();
}

ModelConfig parse(const nlohmann::json& quant) { return parse_model_config(config_with(quant), "m/config.json"); }

std::string parse_error(const nlohmann::json& quant) {
  try {
    parse(quant);
  } catch (const Error& e) {
    return e.what();
  }
  return "(parsed)";
}

nlohmann::json qwen_fp8() {  // Qwen/Qwen3-14B-FP8 config.json
  return {{"activation_scheme", "dynamic"}, {"fmt", "e4m3"}, {"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
}
nlohmann::json qwen_awq() {  // Qwen/Qwen3-14B-AWQ config.json
  return {{"bits", 4}, {"group_size", 128}, {"modules_to_not_convert", nullptr},
          {"quant_method", "awq"}, {"version", "gemm"}, {"zero_point", true}};
}

nlohmann::json qwen_gptq() {  // Qwen/Qwen3-30B-A3B-GPTQ-Int4 config.json
  return {{"bits", 4},          {"group_size", 128},   {"desc_act", false},         {"sym", true},
          {"checkpoint_format", "gptq"}, {"quant_method", "gptq"}, {"damp_percent", 0.01}, {"static_groups", false},
          {"true_sequential", true}, {"model_file_base_name", nullptr}, {"model_name_or_path", nullptr}};
}

}  // namespace

TEST(QuantConfig, AbsentOrNullMeansUnquantized) {
  EXPECT_EQ(parse(nlohmann::json(nlohmann::json::value_t::discarded)).quant.method, QuantMethod::None);
  EXPECT_EQ(parse(nullptr).quant.method, QuantMethod::None);
  EXPECT_STREQ(quant_method_name(QuantMethod::None), "none");
}

TEST(QuantConfig, ParsesQwenFp8) {
  QuantConfig q = parse(qwen_fp8()).quant;
  EXPECT_EQ(q.method, QuantMethod::Fp8);
  EXPECT_EQ(q.fp8_block_n, 128);
  EXPECT_EQ(q.fp8_block_k, 128);
  EXPECT_STREQ(quant_method_name(q.method), "fp8");
  // Other block shapes are read as written ([n, k]: output rows first).
  auto j = qwen_fp8();
  j["weight_block_size"] = {64, 32};
  j["modules_to_not_convert"] = {"lm_head"};
  q = parse(j).quant;
  EXPECT_EQ(q.fp8_block_n, 64);
  EXPECT_EQ(q.fp8_block_k, 32);
}

TEST(QuantConfig, ParsesQwenAwqAndAutoAwqSpellings) {
  QuantConfig q = parse(qwen_awq()).quant;
  EXPECT_EQ(q.method, QuantMethod::Awq);
  EXPECT_EQ(q.awq_bits, 4);
  EXPECT_EQ(q.awq_group, 128);
  EXPECT_TRUE(q.awq_zero_point);
  // AutoAWQ's own quant_config names (w_bit, q_group_size, "GEMM").
  q = parse({{"quant_method", "awq"}, {"w_bit", 4}, {"q_group_size", 64}, {"zero_point", true}, {"version", "GEMM"}})
          .quant;
  EXPECT_EQ(q.awq_group, 64);
}

TEST(QuantConfig, RefusesOtherMethodsNamingTheSupportedOnes) {
  const std::string tail =
      "' is not supported (supported: \"fp8\" block FP8 with 128x128-style tiles, \"awq\" 4-bit GEMM with zero "
      "points, \"gptq\" 4-bit)";
  for (const char* m : {"gptq_marlin", "compressed-tensors", "bitsandbytes", "awq_marlin", "FP8"})
    EXPECT_EQ(parse_error({{"quant_method", m}, {"bits", 4}}),
              std::string("m/config.json: quantization_config.quant_method '") + m + tail);
  EXPECT_EQ(parse_error({{"bits", 4}}),
            "m/config.json: quantization_config has no string 'quant_method' (supported: \"fp8\", \"awq\", \"gptq\")");
  EXPECT_EQ(parse_error("fp8"), "m/config.json: field 'quantization_config' must be an object, got string \"fp8\"");
}

TEST(QuantConfig, RefusesUnsupportedFp8Fields) {
  auto with = [](const char* k, nlohmann::json v) {
    auto j = qwen_fp8();
    j[k] = v;
    return parse_error(j);
  };
  EXPECT_EQ(with("fmt", "e5m2"), "m/config.json: quantization_config.fmt is \"e5m2\" (supported: \"e4m3\")");
  EXPECT_EQ(with("activation_scheme", "static"),
            "m/config.json: quantization_config.activation_scheme is \"static\" (supported: \"dynamic\")");
  EXPECT_EQ(with("weight_block_size", {128}),
            "m/config.json: quantization_config.weight_block_size is [128] (supported: [n, k] of two positive "
            "integers)");
  EXPECT_EQ(with("weight_block_size", {0, 128}),
            "m/config.json: quantization_config.weight_block_size is [0,128] (supported: [n, k] of two positive "
            "integers)");
  EXPECT_EQ(with("modules_to_not_convert", "lm_head"),
            "m/config.json: quantization_config.modules_to_not_convert must be null or a list of module names, got "
            "\"lm_head\"");
  auto j = qwen_fp8();
  j.erase("weight_block_size");
  EXPECT_EQ(parse_error(j),
            "m/config.json: quantization_config.weight_block_size is missing: per-tensor FP8 is not supported "
            "(supported: block FP8 with weight_block_size [n, k], e.g. [128, 128])");
}

TEST(QuantConfig, RefusesUnsupportedAwqFields) {
  auto with = [](const char* k, nlohmann::json v) {
    auto j = qwen_awq();
    j[k] = v;
    return parse_error(j);
  };
  EXPECT_EQ(with("bits", 8), "m/config.json: quantization_config.bits is 8 (supported: 4)");
  EXPECT_EQ(with("group_size", -1),
            "m/config.json: quantization_config.group_size is -1 (supported: a positive group size, e.g. 128)");
  EXPECT_EQ(with("zero_point", false),
            "m/config.json: quantization_config.zero_point is false (supported: true (asymmetric groups with zero "
            "points))");
  for (const char* v : {"gemv", "gemv_fast", "exllama", "marlin", "ipex"})
    EXPECT_EQ(with("version", v),
              std::string("m/config.json: quantization_config.version is \"") + v + "\" (supported: \"gemm\")");
}

TEST(QuantConfig, ParsesQwenGptqInt4) {
  QuantConfig q = parse(qwen_gptq()).quant;
  EXPECT_EQ(q.method, QuantMethod::Gptq);
  EXPECT_STREQ(quant_method_name(q.method), "gptq");
  EXPECT_EQ(q.gptq_bits, 4);
  EXPECT_EQ(q.gptq_group, 128);
  EXPECT_EQ(q.int4_group(), 128);
  EXPECT_TRUE(q.gptq_sym);
  EXPECT_FALSE(q.gptq_desc_act);
  EXPECT_TRUE(q.gptq_v1_zeros);
  // Absent checkpoint_format is v1 (AutoGPTQ); gptq_v2 stores the zeros as they are; GPTQModel's
  // older key is `format`. desc_act true parses: g_idx decides, per tensor, at load.
  auto j = qwen_gptq();
  j.erase("checkpoint_format");
  j["group_size"] = 64;
  j["sym"] = false;
  j["desc_act"] = true;
  q = parse(j).quant;
  EXPECT_TRUE(q.gptq_v1_zeros);
  EXPECT_EQ(q.int4_group(), 64);
  EXPECT_FALSE(q.gptq_sym);
  EXPECT_TRUE(q.gptq_desc_act);
  j["checkpoint_format"] = "gptq_v2";
  EXPECT_FALSE(parse(j).quant.gptq_v1_zeros);
  j.erase("checkpoint_format");
  j["format"] = "gptq_v2";
  EXPECT_FALSE(parse(j).quant.gptq_v1_zeros);
}

TEST(QuantConfig, RefusesUnsupportedGptqFields) {
  auto with = [](const char* k, nlohmann::json v) {
    auto j = qwen_gptq();
    j[k] = v;
    return parse_error(j);
  };
  EXPECT_EQ(with("bits", 8), "m/config.json: quantization_config.bits is 8 (supported: 4)");
  EXPECT_EQ(with("bits", 3), "m/config.json: quantization_config.bits is 3 (supported: 4)");
  EXPECT_EQ(with("group_size", -1),
            "m/config.json: quantization_config.group_size is -1 (supported: a positive group size, e.g. 128)");
  EXPECT_EQ(with("desc_act", "no"), "m/config.json: quantization_config.desc_act is \"no\" (supported: true or false)");
  for (const char* f : {"marlin", "bitblas", "ipex"})
    EXPECT_EQ(with("checkpoint_format", f),
              std::string("m/config.json: quantization_config.checkpoint_format is \"") + f +
                  "\" (supported: \"gptq\" (zero points stored minus one) or \"gptq_v2\")");
  EXPECT_EQ(with("lm_head", true),
            "m/config.json: quantization_config.lm_head is true (supported: false (an unquantized lm_head))");
  EXPECT_EQ(with("pack_dtype", "int16"), "m/config.json: quantization_config.pack_dtype is \"int16\" (supported: \"int32\")");
}
