// Checkpoint directories: config.json errors name the field and file; tensors that don't match
// the config fail at load with the list of offenders; every preset and variant loads and stages.
#include <gtest/gtest.h>

#include <cmath>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint_test_util.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/json_fields.h"
#include "io/safetensors.h"
#include "kernels/backend.h"
#include "model/test_model.h"
#include "model/test_model_hybrid.h"
#include "model/weight_staging.h"

using namespace pypto;
namespace fs = std::filesystem;

namespace {

fs::path make_model(const std::string& name, TestModelOptions opt = {}) { return test::make_model_in_temp(name, opt); }
using test::edit_config;
using test::open_error;

// Rewrites model.safetensors with `edit` applied to the list of tensors (copied from the file).
void edit_tensors(const fs::path& dir, const std::function<void(std::vector<SafetensorWrite>&)>& edit) {
  std::string p = (dir / "model.safetensors").string();
  auto f = SafetensorsFile::open(p);
  std::vector<SafetensorWrite> ts;
  for (const auto& t : f->tensors()) {
    const uint8_t* src = f->data(t);
    size_t n = t.end - t.begin;
    ts.push_back({t.name, t.dtype, t.shape, [src, n](uint8_t* d) { std::memcpy(d, src, n); }});
  }
  edit(ts);
  write_safetensors(p + ".new", ts);
  f.reset();
  fs::rename(p + ".new", p);
}

}  // namespace

TEST(ModelConfig, MissingFieldNamesFieldAndFile) {
  EXPECT_THROW(
      {
        try {
          parse_model_config(R"({"architectures":["Qwen3ForCausalLM"],"vocab_size":10})", "m/config.json");
        } catch (const Error& e) {
          EXPECT_STREQ(e.what(), "m/config.json: missing field 'hidden_size' (an integer)");
          throw;
        }
      },
      Error);
}

TEST(ModelConfig, IllTypedFieldNamesFieldAndType) {
  try {
    parse_model_config(R"({"architectures":["Qwen3ForCausalLM"],"vocab_size":"big"})", "m/config.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "m/config.json: field 'vocab_size' must be an integer, got string \"big\"");
  }
}

TEST(ModelConfig, RejectsUnknownArchitectureAndRopeScaling) {
  const fs::path d = make_model("cfg");
  edit_config(d, [](nlohmann::json& j) { j["architectures"] = {"LlamaForCausalLM"}; });
  EXPECT_EQ(open_error(d), (d / "config.json").string() +
                               ": architecture 'LlamaForCausalLM' is not supported (supported: Qwen3ForCausalLM, "
                               "Qwen2ForCausalLM, Qwen3MoeForCausalLM, Qwen3_5ForConditionalGeneration, "
                               "Qwen3_5MoeForConditionalGeneration, Qwen3_5ForCausalLM, Qwen3_5MoeForCausalLM, Qwen3NextForCausalLM)");
  edit_config(d, [](nlohmann::json& j) {
    j["architectures"] = {"Qwen3ForCausalLM"};
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", 4.0}};
  });
  EXPECT_EQ(open_error(d), (d / "config.json").string() +
                               ": rope_scaling type 'linear' is not supported (supported: default, yarn; linear, "
                               "dynamic, llama3 and longrope are not)");
  edit_config(d, [](nlohmann::json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 0.5}}; });
  EXPECT_EQ(open_error(d), (d / "config.json").string() + ": rope_scaling: field 'factor' must be a number >= 1, got 0.5");
  edit_config(d, [](nlohmann::json& j) { j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}, {"low_freq_factor", 1}}; });
  EXPECT_NE(open_error(d).find("rope_scaling: field 'low_freq_factor' is not a YaRN field"), std::string::npos)
      << open_error(d);
  fs::remove_all(d);
}

// YaRN as Qwen documents it for 131,072 tokens, in both spellings transformers writes.
TEST(ModelConfig, ReadsYarnAndItsPositions) {
  const std::string head = R"({"architectures":["Qwen3ForCausalLM"],"vocab_size":151936,"hidden_size":1024,
      "intermediate_size":3072,"num_hidden_layers":2,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128,
      "rms_norm_eps":1e-6,"max_position_embeddings":40960,)";
  for (const std::string rope :
       {std::string(R"("rope_theta":1000000,"rope_scaling":{"type":"yarn","factor":4.0,"original_max_position_embeddings":32768}})"),
        std::string(R"("rope_parameters":{"rope_theta":1000000,"rope_type":"yarn","factor":4.0,"original_max_position_embeddings":32768}})")}) {
    const ModelConfig c = parse_model_config(head + rope, "c.json");
    EXPECT_TRUE(c.rope_scaling.yarn);
    EXPECT_EQ(c.rope_theta, 1e6);
    EXPECT_EQ(c.rope_scaling.factor, 4.0);
    EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 32768);
    EXPECT_DOUBLE_EQ(c.rope_scaling.attention_factor, 0.1 * std::log(4.0) + 1);
    EXPECT_EQ(model_max_positions(c), 131072);
    EXPECT_NO_THROW(check_max_model_len(c, 131072));
    try {
      check_max_model_len(c, 131073);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("exceeds the model's 131072 positions (YaRN factor 4"), std::string::npos) << e.what();
    }
  }
  // Without rope_scaling the limit is max_position_embeddings, and the error says how to extend it.
  const ModelConfig plain = parse_model_config(head + R"("rope_theta":1000000})", "c.json");
  EXPECT_FALSE(plain.rope_scaling.yarn);
  try {
    check_max_model_len(plain, 40961);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("max_position_embeddings (40960); lower it, or extend the context with YaRN"),
              std::string::npos) << e.what();
  }
}

TEST(ModelConfig, HeadDimComesFromTheFile) {
  // qwen3-0.6b: hidden 1024 / 16 heads = 64, but head_dim is 128.
  ModelConfig c = parse_model_config(
      R"({"architectures":["Qwen3ForCausalLM"],"vocab_size":151936,"hidden_size":1024,"intermediate_size":3072,
          "num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128,
          "rms_norm_eps":1e-6,"rope_theta":1000000,"max_position_embeddings":40960,"tie_word_embeddings":true})",
      "c.json");
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_FALSE(c.attention_bias);
}

TEST(Checkpoint, MismatchedTensorsAreListedTogether) {
  const fs::path d = make_model("mismatch");
  edit_tensors(d, [](std::vector<SafetensorWrite>& ts) {
    std::vector<SafetensorWrite> out;
    for (auto& t : ts) {
      if (t.name == "model.layers.1.mlp.up_proj.weight") continue;  // missing
      if (t.name == "model.layers.0.self_attn.k_proj.weight") t.shape = {32, 128};  // wrong shape, same bytes
      if (t.name == "model.layers.0.mlp.down_proj.weight") {  // unexpected dtype
        int64_t n = shape_numel(t.shape);
        t.dtype = DType::F32;
        t.fill = [n](uint8_t* dst) { std::memset(dst, 0, n * 4); };
      }
      out.push_back(std::move(t));
    }
    ts = std::move(out);
  });
  EXPECT_EQ(open_error(d), d.string() +
                               ": checkpoint does not match config.json (3 tensors):\n"
                               "  model.layers.0.self_attn.k_proj.weight: shape [32, 128], expected [64, 64]\n"
                               "  model.layers.0.mlp.down_proj.weight: dtype F32, expected BF16 like "
                               "model.embed_tokens.weight\n"
                               "  model.layers.1.mlp.up_proj.weight: missing (expected [128, 64])");
  fs::remove_all(d);
}

TEST(Checkpoint, MissingWeightsAndShards) {
  const fs::path d = make_model("shards", {.preset = "tiny", .shards = 3});
  ASSERT_TRUE(fs::exists(d / "model.safetensors.index.json"));
  EXPECT_EQ(open_error(d), "");
  fs::remove(d / "model-00002-of-00003.safetensors");
  EXPECT_EQ(open_error(d), (d / "model.safetensors.index.json").string() +
                               ": shard 'model-00002-of-00003.safetensors' listed in weight_map does not exist");
  fs::remove_all(d);
  fs::create_directories(d);
  EXPECT_EQ(open_error(d), (d / "config.json").string() + ": missing (a checkpoint directory needs config.json)");
  fs::remove_all(d);
}

TEST(Checkpoint, NoQkNormLoadsWithOnes) {
  const fs::path d = make_model("noqk", {.preset = "tiny", .qk_norm = false});
  auto ck = Checkpoint::open(d.string());
  EXPECT_EQ(ck->find("model.layers.0.self_attn.q_norm.weight"), nullptr);
  auto backend = make_reference_backend();
  Qwen3Weights w = stage_qwen3_weights(*ck, *backend, {.show_progress = false});
  for (int i = 0; i < 32; i++) {
    EXPECT_EQ(w.layers[1].q_norm[i], 1.0f);
    EXPECT_EQ(w.layers[1].k_norm[i], 1.0f);
  }
  fs::remove_all(d);
}

// Every dtype and the sharded layout stage to the same values (up to the dtype's rounding) as
// the checkpoint holds, at the right places of the fused matrices.
TEST(Staging, FusedLayoutHoldsTheCheckpointRows) {
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    const fs::path d = make_model("stage", {.preset = "tiny", .dtype = dt, .shards = 2});
    auto ck = Checkpoint::open(d.string());
    auto backend = make_reference_backend();
    ASSERT_TRUE(backend->weight_layout_is_plain(dt));
    Qwen3Weights w = stage_qwen3_weights(*ck, *backend, {.show_progress = false});
    const ModelConfig& c = ck->config();
    const auto& L = w.layers[1];
    auto at = [&](const std::string& name, int64_t i) {
      const TensorRef& r = ck->get(name);
      return load_as_f32(r.data(), r.info->dtype, i);
    };
    const int64_t H = c.hidden_size;
    // k_proj row 3 sits after the q rows of the fused qkv.
    for (int64_t j = 0; j < H; j++)
      ASSERT_EQ(load_as_f32(L.qkv.data, dt, (c.q_size() + 3) * H + j), at("model.layers.1.self_attn.k_proj.weight", 3 * H + j));
    // up_proj row 5 sits after the gate rows.
    for (int64_t j = 0; j < H; j++)
      ASSERT_EQ(load_as_f32(L.gate_up.data, dt, (c.intermediate_size + 5) * H + j), at("model.layers.1.mlp.up_proj.weight", 5 * H + j));
    EXPECT_EQ(L.input_norm[7], at("model.layers.1.input_layernorm.weight", 7));
    EXPECT_EQ(w.lm_head.data, w.embed) << "tied head shares the embedding";
    fs::remove_all(d);
  }
}

// Tensor-parallel staging: rank r's o_proj holds input columns [r*q/tp, (r+1)*q/tp).
TEST(Staging, TensorParallelSlices) {
  const fs::path d = make_model("tp", {.preset = "tiny"});
  auto ck = Checkpoint::open(d.string());
  auto backend = make_reference_backend();
  const ModelConfig& c = ck->config();
  const TensorRef& o = ck->get("model.layers.0.self_attn.o_proj.weight");
  const TensorRef& k = ck->get("model.layers.0.self_attn.k_proj.weight");
  for (int rank = 0; rank < 2; rank++) {
    Qwen3Weights w = stage_qwen3_weights(*ck, *backend, {.tp_rank = rank, .tp_size = 2, .show_progress = false});
    const int64_t qr = c.q_size() / 2, kvr = c.kv_size() / 2, H = c.hidden_size;
    EXPECT_EQ(w.n_heads, 2);
    EXPECT_EQ(w.layers[0].o_proj.k_in, qr);
    for (int64_t row = 0; row < H; row += 13)
      for (int64_t j = 0; j < qr; j++)
        ASSERT_EQ(load_as_f32(w.layers[0].o_proj.data, DType::BF16, row * qr + j),
                  load_as_f32(o.data(), DType::BF16, row * c.q_size() + rank * qr + j));
    for (int64_t j = 0; j < H; j++)  // first k row of this rank
      ASSERT_EQ(load_as_f32(w.layers[0].qkv.data, DType::BF16, qr * H + j),
                load_as_f32(k.data(), DType::BF16, rank * kvr * H + j));
  }
  EXPECT_THROW(stage_qwen3_weights(*ck, *backend, {.tp_rank = 0, .tp_size = 3, .show_progress = false}), Error);
  fs::remove_all(d);
}

// Every preset loads with reduced layers and matches its real shape.
TEST(Presets, AllLoadWithFewLayers) {
  for (const std::string& p : test_model_presets()) {
    if (p == "qwen3-8b" || p == "qwen3-14b") continue;  // covered below with one layer (large embeddings)
    if (test_model_config(p).num_experts > 0) continue;  // MoE presets: moe_checkpoint_test.cpp
    // qwen3-0.6b's shapes again (a third of this test's time); the layouts: pooling_checkpoint_test.cpp
    if (p.starts_with("qwen3-embedding") || p.starts_with("qwen3-reranker")) continue;
    if (is_hybrid_test_model_preset(p)) continue;  // Qwen3.5 / 3.6 shapes: hybrid_checkpoint_test.cpp
    const fs::path d = make_model("preset", {.preset = p, .layers = 1});
    auto ck = Checkpoint::open(d.string());
    ModelConfig want = test_model_config(p);
    EXPECT_EQ(ck->config().hidden_size, want.hidden_size) << p;
    EXPECT_EQ(ck->config().head_dim, p.starts_with("tiny") ? 32 : 128) << p;  // tiny, tiny-embedding, tiny-reranker: 32
    EXPECT_EQ(ck->config().num_hidden_layers, 1);
    validate_qwen3_checkpoint(*ck);
    fs::remove_all(d);
  }
}

TEST(Presets, LargeShapesValidate) {
  for (const char* p : {"qwen3-8b", "qwen3-14b"}) {
    const fs::path d = make_model("large", {.preset = p, .layers = 1});
    auto ck = Checkpoint::open(d.string());
    EXPECT_FALSE(ck->config().tie_word_embeddings);
    EXPECT_NE(ck->find("lm_head.weight"), nullptr);
    validate_qwen3_checkpoint(*ck);
    fs::remove_all(d);
  }
}
