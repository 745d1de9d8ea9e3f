// Qwen3-MoE config.json: the fields Qwen publishes are read (both spellings of the expert count,
// an explicit head_dim), the sparse-layer rule is transformers', and inconsistent configs are
// refused naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "core/error.h"
#include "io/model_config.h"

using namespace pypto;

namespace {

// Qwen3-30B-A3B's config.json (the fields the engine reads), as Qwen publishes it.
nlohmann::json qwen3_30b_a3b() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "vocab_size": 151936,
    "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 48, "num_attention_heads": 32,
    "num_key_value_heads": 4, "head_dim": 128, "hidden_act": "silu", "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0, "rope_scaling": null, "max_position_embeddings": 40960,
    "tie_word_embeddings": false, "torch_dtype": "bfloat16", "num_experts": 128, "num_experts_per_tok": 8,
    "moe_intermediate_size": 768, "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": true,
    "router_aux_loss_coef": 0.001, "output_router_logits": false, "use_sliding_window": false,
    "bos_token_id": 151643, "eos_token_id": 151645})");
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

TEST(MoeConfig, ReadsQwen3_30B_A3B) {
  const ModelConfig c = parse(qwen3_30b_a3b());
  EXPECT_EQ(c.arch, ModelArch::Qwen3Moe);
  EXPECT_EQ(c.num_experts, 128);
  EXPECT_EQ(c.num_experts_per_tok, 8);
  EXPECT_EQ(c.moe_intermediate_size, 768);
  EXPECT_TRUE(c.norm_topk_prob);
  EXPECT_EQ(c.head_dim, 128) << "explicit, not hidden / heads = 64";
  EXPECT_EQ(c.q_size(), 4096);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
  for (int i = 0; i < 48; ++i) EXPECT_TRUE(c.sparse_layer(i)) << i;
  EXPECT_FALSE(c.has_dense_layers());
}

// (v5's rope_parameters form is read by main's YaRN change, io/rope_scaling.h.)
TEST(MoeConfig, AcceptsTransformersV5Spellings) {
  nlohmann::json j = qwen3_30b_a3b();
  j.erase("num_experts");
  j["num_local_experts"] = 64;
  j.erase("norm_topk_prob");  // the class default: no renormalisation
  const ModelConfig c = parse(j);
  EXPECT_EQ(c.num_experts, 64);
  EXPECT_FALSE(c.norm_topk_prob);
  j["num_experts"] = 64;  // both spellings, agreeing
  EXPECT_EQ(parse(j).num_experts, 64);
}

// transformers: sparse iff num_experts > 0 and (i + 1) % decoder_sparse_step == 0 and i not in
// mlp_only_layers.
TEST(MoeConfig, SparseLayersFollowStepAndMlpOnlyLayers) {
  nlohmann::json j = qwen3_30b_a3b();
  j["num_hidden_layers"] = 6;
  j["decoder_sparse_step"] = 2;
  j["mlp_only_layers"] = {3};
  const ModelConfig c = parse(j);
  const bool want[] = {false, true, false, false, false, true};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(c.sparse_layer(i), want[i]) << i;
  EXPECT_TRUE(c.has_dense_layers());
  j["num_experts"] = 0;  // no experts: every layer dense
  const ModelConfig dense = parse(j);
  for (int i = 0; i < 6; ++i) EXPECT_FALSE(dense.sparse_layer(i)) << i;
  // The dense MLP's width is needed only when some layer is dense.
  j["num_experts"] = 8;
  j["num_experts_per_tok"] = 2;
  j.erase("intermediate_size");
  EXPECT_EQ(parse_error(j), "m/config.json: missing field 'intermediate_size' (an integer)");
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = nlohmann::json::array();
  EXPECT_EQ(parse(j).intermediate_size, 0);
}

TEST(MoeConfig, InconsistentConfigsNameTheField) {
  auto error_with = [](const char* key, const nlohmann::json& v) {
    nlohmann::json j = qwen3_30b_a3b();
    j[key] = v;
    return parse_error(j);
  };
  EXPECT_EQ(error_with("num_experts_per_tok", 129),
            "m/config.json: field 'num_experts_per_tok' is 129; it must be in [1, num_experts = 128]");
  EXPECT_EQ(error_with("num_experts_per_tok", 0),
            "m/config.json: field 'num_experts_per_tok' is 0; it must be in [1, num_experts = 128]");
  EXPECT_EQ(error_with("shared_expert_intermediate_size", 768),
            "m/config.json: field 'shared_expert_intermediate_size' is 768; Qwen3-MoE has no shared expert (only 0 "
            "is supported)");
  EXPECT_EQ(error_with("shared_expert_intermediate_size", 0), "") << "the Coder config writes 0";
  EXPECT_EQ(error_with("hidden_act", "gelu"), "m/config.json: field 'hidden_act' is 'gelu'; only silu is supported");
  EXPECT_EQ(error_with("mlp_only_layers", {2, 48}),
            "m/config.json: field 'mlp_only_layers' lists layer 48, outside [0, num_hidden_layers = 48)");
  EXPECT_EQ(error_with("decoder_sparse_step", 0),
            "m/config.json: field 'decoder_sparse_step' must be a positive integer, got 0");
  EXPECT_EQ(error_with("moe_intermediate_size", -1),
            "m/config.json: field 'moe_intermediate_size' must be a positive integer, got -1");
  EXPECT_EQ(error_with("num_local_experts", 64),
            "m/config.json: fields 'num_experts' (128) and 'num_local_experts' (64) disagree");
  EXPECT_EQ(error_with("model_type", "qwen3"),
            "m/config.json: field 'model_type' is 'qwen3' but architectures names Qwen3MoeForCausalLM (model_type "
            "qwen3_moe)");
  nlohmann::json j = qwen3_30b_a3b();
  j.erase("num_experts");
  EXPECT_EQ(parse_error(j),
            "m/config.json: missing field 'num_experts' (or 'num_local_experts'): the routed experts per layer");
}
