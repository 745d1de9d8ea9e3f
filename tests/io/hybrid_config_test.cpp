// Qwen3.5 / Qwen3.6 hybrid config.json: the published wrapper (text_config) and the text-only
// layout are read, layer_types or full_attention_interval give the layer pattern, rope_parameters
// give θ and the partial rotary dims, and inconsistent configs are refused naming the field.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "io/rope_scaling.h"

using namespace pypto;

namespace {

// Qwen3.6-35B-A3B's text settings (fact sheet §2.1), as the wrapper nests them.
nlohmann::json moe_text() {
  return nlohmann::json::parse(R"({
    "model_type": "qwen3_5_moe_text", "vocab_size": 248320, "hidden_size": 2048, "num_hidden_layers": 40,
    "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256, "attention_bias": false,
    "attn_output_gate": true, "linear_num_key_heads": 16, "linear_num_value_heads": 32,
    "linear_key_head_dim": 128, "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4,
    "full_attention_interval": 4, "hidden_act": "silu", "rms_norm_eps": 1e-6,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000000, "partial_rotary_factor": 0.25,
                        "mrope_section": [11, 11, 10], "mrope_interleaved": true},
    "max_position_embeddings": 262144, "mamba_ssm_dtype": "float32", "num_experts": 256,
    "num_experts_per_tok": 8, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
    "mtp_num_hidden_layers": 1, "dtype": "bfloat16", "eos_token_id": 248044})");
}

nlohmann::json wrapper(const nlohmann::json& text, bool moe = true) {
  return {{"architectures", {moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration"}},
          {"model_type", moe ? "qwen3_5_moe" : "qwen3_5"},
          {"text_config", text},
          {"vision_config", {{"model_type", "qwen3_5_moe_vision"}}},
          {"tie_word_embeddings", false},
          {"eos_token_id", 248046}};
}

ModelConfig parse(const nlohmann::json& j) { return parse_model_config(j.dump(), "m/config.json"); }

std::string parse_error(const nlohmann::json& j) {
  try {
    parse(j);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(HybridConfig, ReadsTheMoeWrapper) {
  const ModelConfig c = parse(wrapper(moe_text()));
  EXPECT_EQ(c.arch, ModelArch::Qwen35Moe);
  EXPECT_TRUE(c.hybrid());
  EXPECT_TRUE(c.multimodal_wrapper);
  EXPECT_EQ(c.tensor_prefix, "model.language_model.");
  EXPECT_EQ(c.vocab_size, 248320);
  EXPECT_EQ(c.head_dim, 256);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.gdn_conv_dim(), 8192);  // in_proj_qkv rows: 2 · 16 · 128 + 32 · 128
  EXPECT_EQ(c.num_full_attention_layers(), 10);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(c.full_attention_layer(i), (i + 1) % 4 == 0) << i;
  EXPECT_TRUE(c.norm_topk_prob) << "Qwen3.5-MoE always renormalises";
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  for (int i = 0; i < 40; ++i) EXPECT_TRUE(c.sparse_layer(i));
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{248044, 248046})) << "text_config's and the wrapper's";
  // rope_parameters without partial_rotary_factor: the class default 0.25, which transformers
  // copies into rope_parameters (not 1.0: that would rotate all 256 dims).
  nlohmann::json t = moe_text();
  t["rope_parameters"].erase("partial_rotary_factor");
  EXPECT_EQ(parse(wrapper(t)).rotary_dim, 64);
  t["partial_rotary_factor"] = 0.5;  // a top-level value still applies
  EXPECT_EQ(parse(wrapper(t)).rotary_dim, 128);
}

TEST(HybridConfig, ReadsTheTextOnlyDenseLayoutWithLayerTypes) {
  nlohmann::json t = moe_text();
  for (const char* k : {"num_experts", "num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"})
    t.erase(k);
  t["intermediate_size"] = 3584;
  t["num_hidden_layers"] = 3;
  t["layer_types"] = {"linear_attention", "full_attention", "linear_attention"};
  t["tie_word_embeddings"] = true;
  t["architectures"] = {"Qwen3_5ForCausalLM"};
  t["model_type"] = "qwen3_5_text";
  const ModelConfig c = parse(t);
  EXPECT_EQ(c.arch, ModelArch::Qwen35);
  EXPECT_EQ(c.tensor_prefix, "model.");
  EXPECT_FALSE(c.full_attention_layer(0));
  EXPECT_TRUE(c.full_attention_layer(1));
  EXPECT_EQ(c.num_full_attention_layers(), 1);
  EXPECT_EQ(c.intermediate_size, 3584);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.has_sparse_layers());
}

TEST(HybridConfig, RefusesInconsistentFieldsNamingThem) {
  auto with = [](const char* key, nlohmann::json v) {
    nlohmann::json t = moe_text();
    t[key] = std::move(v);
    return wrapper(t);
  };
  EXPECT_NE(parse_error(with("layer_types", {"linear_attention"})).find("'layer_types' lists 1 layers"), std::string::npos);
  nlohmann::json bad_types = nlohmann::json::array();
  for (int i = 0; i < 40; ++i) bad_types.push_back(i == 3 ? "sliding_attention" : "linear_attention");
  EXPECT_NE(parse_error(with("layer_types", bad_types)).find("entry 3"), std::string::npos);
  EXPECT_NE(parse_error(with("linear_num_value_heads", 24)).find("linear_num_value_heads (24)"), std::string::npos);
  EXPECT_NE(parse_error(with("norm_topk_prob", false)).find("norm_topk_prob"), std::string::npos);
  EXPECT_NE(parse_error(with("attn_output_gate", false)).find("attn_output_gate"), std::string::npos);
  EXPECT_NE(parse_error(with("mlp_only_layers", {1})).find("mlp_only_layers"), std::string::npos);
  EXPECT_NE(parse_error(with("mamba_ssm_dtype", "bfloat16")).find("mamba_ssm_dtype"), std::string::npos);
  EXPECT_NE(parse_error(with("rope_parameters", {{"rope_type", "linear"}})).find("'rope_parameters.rope_type' is 'linear'"),
            std::string::npos);
  EXPECT_NE(parse_error(with("rope_parameters", {{"rope_type", "yarn"}})).find("YaRN needs 'factor'"), std::string::npos);
  EXPECT_NE(parse_error(with("rope_parameters", {{"partial_rotary_factor", 1.5}})).find("partial_rotary_factor"),
            std::string::npos);
  EXPECT_NE(parse_error(with("tie_word_embeddings", true)).find("disagree"), std::string::npos);
  nlohmann::json no_gdn = moe_text();
  no_gdn.erase("linear_key_head_dim");
  EXPECT_NE(parse_error(wrapper(no_gdn)).find("linear_key_head_dim"), std::string::npos);
  nlohmann::json no_text = wrapper(moe_text());
  no_text.erase("text_config");
  EXPECT_NE(parse_error(no_text).find("text_config"), std::string::npos);
  nlohmann::json wrong_type = wrapper(moe_text());
  wrong_type["model_type"] = "qwen3_moe";
  EXPECT_NE(parse_error(wrong_type).find("model_type"), std::string::npos);
}

TEST(HybridConfig, DerivesLayerTypesFromTheInterval) {
  nlohmann::json t = moe_text();
  t["full_attention_interval"] = 2;
  t["num_hidden_layers"] = 5;
  const ModelConfig c = parse(wrapper(t));
  EXPECT_EQ(c.full_attention, (std::vector<uint8_t>{0, 1, 0, 1, 0}));
}

// Qwen3-Next-80B-A3B-Instruct's config.json as transformers' Qwen3NextConfig reads it (its class
// defaults are this model): top-level rope_theta / partial_rotary_factor, full_attention_interval,
// norm_topk_prob, decoder_sparse_step and mlp_only_layers, Qwen3's vocabulary.
nlohmann::json qwen3_next() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "vocab_size": 151936,
    "hidden_size": 2048, "intermediate_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "attention_bias": false, "attention_dropout": 0.0,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "full_attention_interval": 4,
    "hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000000, "partial_rotary_factor": 0.25,
    "rope_scaling": null, "max_position_embeddings": 262144, "num_experts": 512, "num_experts_per_tok": 10,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "norm_topk_prob": true,
    "decoder_sparse_step": 1, "mlp_only_layers": [], "tie_word_embeddings": false, "torch_dtype": "bfloat16",
    "bos_token_id": 151643, "eos_token_id": 151645})");
}

TEST(HybridConfig, ReadsQwen3Next) {
  const ModelConfig c = parse(qwen3_next());
  EXPECT_EQ(c.arch, ModelArch::Qwen35Moe);
  EXPECT_EQ(c.architecture, "Qwen3NextForCausalLM");
  EXPECT_FALSE(c.multimodal_wrapper);
  EXPECT_EQ(c.tensor_prefix, "model.");
  EXPECT_EQ(c.vocab_size, 151936);
  EXPECT_EQ(c.num_experts, 512);
  EXPECT_EQ(c.num_experts_per_tok, 10);
  EXPECT_EQ(c.shared_expert_intermediate_size, 512);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.num_full_attention_layers(), 12);
  EXPECT_EQ(c.full_attention[3], 1);
  EXPECT_EQ(c.full_attention[4], 0);
  EXPECT_FALSE(c.tie_word_embeddings);
  nlohmann::json flat = qwen3_next();
  flat["norm_topk_prob"] = false;  // a flag in Qwen3-Next (refused for Qwen3.5-MoE)
  EXPECT_FALSE(parse(flat).norm_topk_prob);
  flat.erase("norm_topk_prob");  // the class default
  EXPECT_TRUE(parse(flat).norm_topk_prob);
  flat.erase("partial_rotary_factor");  // the class default 0.25
  EXPECT_EQ(parse(flat).rotary_dim, 64);
}

TEST(HybridConfig, RefusesQwen3NextSettingsItDoesNotServe) {
  auto error_with = [](const char* key, const nlohmann::json& value) {
    nlohmann::json j = qwen3_next();
    j[key] = value;
    return parse_error(j);
  };
  std::string e = error_with("model_type", "qwen3_5_moe");
  EXPECT_NE(e.find("model_type"), std::string::npos) << e;
  e = error_with("attention_bias", true);
  EXPECT_NE(e.find("attention_bias"), std::string::npos) << e;
  // The dense-layer keys and YaRN are read (below); bad values of them are refused by name.
  e = error_with("mlp_only_layers", {1, 48});
  EXPECT_NE(e.find("'mlp_only_layers' lists layer 48, outside [0, num_hidden_layers = 48)"), std::string::npos) << e;
  e = error_with("mlp_only_layers", "1");
  EXPECT_NE(e.find("mlp_only_layers"), std::string::npos) << e;
  e = error_with("decoder_sparse_step", 0);
  EXPECT_NE(e.find("'decoder_sparse_step' must be a positive integer"), std::string::npos) << e;
  e = error_with("num_experts", -1);
  EXPECT_NE(e.find("num_experts"), std::string::npos) << e;
  e = error_with("rope_scaling", {{"rope_type", "linear"}, {"factor", 4.0}});
  EXPECT_NE(e.find("'rope_scaling.rope_type' is 'linear'"), std::string::npos) << e;
  e = error_with("rope_scaling", {{"rope_type", "yarn"}, {"factor", 4.0}, {"low_freq_factor", 1}});
  EXPECT_NE(e.find("'low_freq_factor' is not a YaRN field"), std::string::npos) << e;
  e = error_with("rope_parameters", {{"rope_type", "yarn"}, {"factor", 4.0}});  // beside rope_scaling yarn below
  EXPECT_EQ(e, "") << "rope_parameters alone (rope_scaling null) is read";
  nlohmann::json both = qwen3_next();
  both["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e7}};
  both["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  e = parse_error(both);
  EXPECT_NE(e.find("'rope_parameters' and 'rope_scaling' are both set"), std::string::npos) << e;
  // Dense layers need intermediate_size.
  nlohmann::json no_inter = qwen3_next();
  no_inter["decoder_sparse_step"] = 2;
  no_inter.erase("intermediate_size");
  e = parse_error(no_inter);
  EXPECT_NE(e.find("intermediate_size"), std::string::npos) << e;
}

// Dense Qwen3-Next layers (transformers' Qwen3NextDecoderLayer): layer i is sparse iff i is not in
// mlp_only_layers, num_experts > 0 and (i + 1) % decoder_sparse_step == 0.
TEST(HybridConfig, ReadsQwen3NextDenseLayers) {
  nlohmann::json j = qwen3_next();
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3, 10};
  ModelConfig c = parse(j);
  for (int i = 0; i < 48; ++i) EXPECT_EQ(c.sparse_layer(i), (i + 1) % 2 == 0 && i != 3) << i;
  EXPECT_EQ(c.intermediate_size, 5120);
  EXPECT_TRUE(c.has_dense_layers());
  EXPECT_TRUE(c.has_sparse_layers());
  j = qwen3_next();
  j["mlp_only_layers"] = {0};
  c = parse(j);
  EXPECT_FALSE(c.sparse_layer(0));
  EXPECT_TRUE(c.sparse_layer(1));
  // num_experts 0: every layer dense; the routing fields are unused.
  j = qwen3_next();
  j["num_experts"] = 0;
  j.erase("num_experts_per_tok");
  c = parse(j);
  EXPECT_FALSE(c.has_sparse_layers());
  EXPECT_EQ(c.num_experts, 0);
  // Qwen3.5-MoE has neither key: anything but every layer sparse is refused.
  nlohmann::json t = moe_text();
  t["decoder_sparse_step"] = 2;
  const std::string e = parse_error(wrapper(t));
  EXPECT_NE(e.find("decoder_sparse_step"), std::string::npos) << e;
}

// YaRN on the hybrids' partial RoPE: Qwen3.5's rope_parameters (with its MRoPE keys and the
// partial factor inside), Qwen3-Next's v4 rope_scaling beside top-level rope_theta /
// partial_rotary_factor; the positions limit follows as for dense Qwen3.
TEST(HybridConfig, ReadsYarnOnThePartialRope) {
  nlohmann::json t = moe_text();
  t["rope_parameters"]["rope_type"] = "yarn";
  t["rope_parameters"]["factor"] = 4.0;
  t["rope_parameters"]["original_max_position_embeddings"] = 262144;
  ModelConfig c = parse(wrapper(t));
  EXPECT_TRUE(c.rope_scaling.yarn);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 262144);
  EXPECT_NEAR(c.rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-15);
  EXPECT_EQ(c.rotary_dim, 64);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(model_max_positions(c), 4 * 262144);
  t["rope_parameters"]["rope_type"] = "longrope";
  std::string e = parse_error(wrapper(t));
  EXPECT_NE(e.find("'rope_parameters.rope_type' is 'longrope'"), std::string::npos) << e;
  t["rope_parameters"]["rope_type"] = "yarn";
  t["rope_parameters"]["mrope_section"] = "11";
  e = parse_error(wrapper(t));
  EXPECT_NE(e.find("mrope_section"), std::string::npos) << e;

  nlohmann::json n = qwen3_next();
  n["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 2.0}, {"original_max_position_embeddings", 65536}};
  c = parse(n);
  EXPECT_TRUE(c.rope_scaling.yarn);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 2.0);
  EXPECT_EQ(c.rotary_dim, 64) << "the top-level partial_rotary_factor still applies";
  EXPECT_EQ(model_max_positions(c), 262144) << "max(max_position_embeddings, factor x original)";
  EXPECT_NO_THROW(check_max_model_len(c, 262144));
  try {
    check_max_model_len(c, 262145);
    ADD_FAILURE() << "accepted --max-model-len past the model's positions";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("262144"), std::string::npos) << err.what();
  }
}

// --hf-overrides on the wrapper: text_config is merged key by key (objects inside it too, as vLLM
// updates a nested config), so a YaRN rope_parameters keeps θ, the partial factor and the MRoPE
// keys; a top-level rope override, which the text model would not read, is refused naming the
// text_config form.
TEST(HybridConfig, HfOverridesMergeTextConfigKeyByKey) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("pypto_hybrid_overrides_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << wrapper(moe_text()).dump(2);
  const ModelConfig c = read_model_config(
      dir.string(),
      R"({"text_config": {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144}}})");
  EXPECT_TRUE(c.rope_scaling.yarn);
  EXPECT_DOUBLE_EQ(c.rope_scaling.factor, 4.0);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7) << "rope_theta kept from config.json";
  EXPECT_EQ(c.rotary_dim, 64) << "partial_rotary_factor kept from config.json";
  EXPECT_EQ(c.num_experts, 256) << "the rest of text_config kept";
  try {
    read_model_config(dir.string(), R"({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}})");
    ADD_FAILURE() << "a top-level rope override on the wrapper was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("text_config"), std::string::npos) << e.what();
  }
  std::filesystem::remove_all(dir);
}
