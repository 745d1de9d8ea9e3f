// Qwen3-MoE checkpoints from make-test-model: tensors as Qwen publishes them are validated (a
// missing expert or a wrong shape is named), staged into the router and per-expert fused
// gate|up / down weights (quantized like the dense MLP, the router never), and refused under --tp.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "checkpoint_test_util.h"
#include "core/error.h"
#include "io/checkpoint.h"
#include "io/json_fields.h"
#include "kernels/backend.h"
#include "model/test_model.h"
#include "model/weight_staging.h"

using namespace pypto;
namespace fs = std::filesystem;

namespace {

fs::path make_moe(const std::string& name, TestModelOptions opt = {.preset = "tiny-moe"}) {
  return test::make_model_in_temp("moe_" + name, opt);
}
using test::edit_config;
using test::open_error;

}  // namespace

TEST(MoePresets, RealShapes) {
  const ModelConfig a3b = test_model_config("qwen3-30b-a3b");
  EXPECT_EQ(a3b.architecture, "Qwen3MoeForCausalLM");
  EXPECT_EQ(a3b.hidden_size, 2048);
  EXPECT_EQ(a3b.num_hidden_layers, 48);
  EXPECT_EQ(a3b.q_size(), 32 * 128);
  EXPECT_EQ(a3b.kv_size(), 4 * 128);
  EXPECT_EQ(a3b.num_experts, 128);
  EXPECT_EQ(a3b.num_experts_per_tok, 8);
  EXPECT_EQ(a3b.moe_intermediate_size, 768);
  EXPECT_TRUE(a3b.norm_topk_prob);
  EXPECT_FALSE(a3b.tie_word_embeddings);
  EXPECT_FALSE(a3b.has_dense_layers());
  const ModelConfig a22b = test_model_config("qwen3-235b-a22b");
  EXPECT_EQ(a22b.hidden_size, 4096);
  EXPECT_EQ(a22b.num_hidden_layers, 94);
  EXPECT_EQ(a22b.q_size(), 64 * 128);
  EXPECT_EQ(a22b.moe_intermediate_size, 1536);
  EXPECT_EQ(a22b.num_experts, 128);
}

// tiny-moe writes what Qwen writes and reads back as itself; --layers keeps mlp_only_layers inside.
TEST(MoePresets, TinyMoeLoadsWithDenseAndSparseLayers) {
  const fs::path d = make_moe("tiny");
  auto ck = Checkpoint::open(d.string());
  const ModelConfig& c = ck->config();
  EXPECT_EQ(c.arch, ModelArch::Qwen3Moe);
  EXPECT_TRUE(c.sparse_layer(0));
  EXPECT_FALSE(c.sparse_layer(1));
  EXPECT_TRUE(c.sparse_layer(2));
  EXPECT_NE(ck->find("model.layers.0.mlp.gate.weight"), nullptr);
  EXPECT_NE(ck->find("model.layers.2.mlp.experts.7.down_proj.weight"), nullptr);
  EXPECT_EQ(ck->find("model.layers.0.mlp.gate_proj.weight"), nullptr);
  EXPECT_NE(ck->find("model.layers.1.mlp.gate_proj.weight"), nullptr);
  EXPECT_EQ(ck->find("model.layers.1.mlp.gate.weight"), nullptr);
  validate_qwen3_checkpoint(*ck);
  fs::remove_all(d);

  const fs::path one = make_moe("one", {.preset = "tiny-moe", .layers = 1});
  auto ck1 = Checkpoint::open(one.string());
  EXPECT_TRUE(ck1->config().mlp_only_layers.empty());
  validate_qwen3_checkpoint(*ck1);
  fs::remove_all(one);
}

// A config asking for a ninth expert: its tensors are missing and the router has the wrong shape;
// every offender is named.
TEST(MoeCheckpoint, MissingExpertAndWrongRouterShapeAreNamed) {
  const fs::path d = make_moe("mismatch");
  edit_config(d, [](nlohmann::json& j) { j["num_experts"] = 9; });
  const std::string err = open_error(d);
  EXPECT_NE(err.find("model.layers.0.mlp.gate.weight: shape [8, 64], expected [9, 64]"), std::string::npos) << err;
  EXPECT_NE(err.find("model.layers.0.mlp.experts.8.gate_proj.weight: missing (expected [128, 64])"), std::string::npos)
      << err;
  EXPECT_NE(err.find("model.layers.2.mlp.experts.8.down_proj.weight: missing (expected [64, 128])"), std::string::npos)
      << err;
  EXPECT_EQ(err.find("model.layers.1."), std::string::npos) << "layer 1 is dense: " << err;
  edit_config(d, [](nlohmann::json& j) {
    j["num_experts"] = 8;
    j["moe_intermediate_size"] = 64;
  });
  EXPECT_NE(open_error(d).find("model.layers.0.mlp.experts.0.down_proj.weight: shape [64, 128], expected [64, 64]"),
            std::string::npos)
      << open_error(d);
  fs::remove_all(d);
}

// The staged router and experts hold the checkpoint's rows: the expert's up rows follow its gate
// rows as in the dense MLP; the dense layer keeps the dense MLP.
TEST(MoeStaging, RouterAndExpertsHoldTheCheckpointRows) {
  const fs::path d = make_moe("stage", {.preset = "tiny-moe", .dtype = DType::F32});
  auto ck = Checkpoint::open(d.string());
  auto backend = make_reference_backend();
  Qwen3Weights w = stage_qwen3_weights(*ck, *backend, {.show_progress = false});
  const ModelConfig& c = ck->config();
  const int64_t H = c.hidden_size, mI = c.moe_intermediate_size;
  ASSERT_EQ(w.layers.size(), 3u);
  EXPECT_FALSE(w.layers[1].sparse);
  EXPECT_EQ(w.layers[1].gate_up.n_out, 2 * c.intermediate_size);
  const Qwen3LayerWeights& L = w.layers[2];
  ASSERT_TRUE(L.sparse);
  ASSERT_EQ(L.experts.size(), 8u);
  EXPECT_EQ(L.router.n_out, 8);
  EXPECT_EQ(w.moe_inter, mI);
  auto at = [&](const std::string& name, int64_t i) {
    const TensorRef& r = ck->get(name);
    return load_as_f32(r.data(), r.info->dtype, size_t(i));
  };
  for (int64_t j = 0; j < H; j++) {
    ASSERT_EQ(load_as_f32(L.router.data, DType::F32, 5 * H + j), at("model.layers.2.mlp.gate.weight", 5 * H + j));
    ASSERT_EQ(load_as_f32(L.experts[6].gate_up.data, DType::F32, 3 * H + j),
              at("model.layers.2.mlp.experts.6.gate_proj.weight", 3 * H + j));
    ASSERT_EQ(load_as_f32(L.experts[6].gate_up.data, DType::F32, (mI + 3) * H + j),
              at("model.layers.2.mlp.experts.6.up_proj.weight", 3 * H + j));
  }
  for (int64_t j = 0; j < mI; j++)
    ASSERT_EQ(load_as_f32(L.experts[4].down.data, DType::F32, 9 * mI + j),
              at("model.layers.2.mlp.experts.4.down_proj.weight", 9 * mI + j));
  fs::remove_all(d);
}

// --quantization quantizes the experts like every projection; the router stays float.
TEST(MoeStaging, QuantizationCoversExpertsNotTheRouter) {
  const fs::path d = make_moe("quant");
  auto ck = Checkpoint::open(d.string());
  auto backend = make_reference_backend();
  for (WeightFormat f : {WeightFormat::Int8, WeightFormat::Int4}) {
    Qwen3Weights w = stage_qwen3_weights(*ck, *backend, {.show_progress = false, .quantization = f});
    const Qwen3LayerWeights& L = w.layers[0];
    EXPECT_EQ(L.router.format, WeightFormat::Float);
    EXPECT_EQ(L.router.dtype, DType::BF16);
    for (const auto& x : L.experts) {
      EXPECT_EQ(x.gate_up.format, f);
      EXPECT_EQ(x.down.format, f);
    }
    EXPECT_EQ(w.layers[1].gate_up.format, f);
  }
  fs::remove_all(d);
}

// Tensor parallelism shards the experts (tiny-moe: 8 experts of width 128): split by columns,
// each of 2 ranks holds all 8 experts at width 64; expert parallel, experts 0-3 and 4-7 whole.
// The two ranks' slabs hold the experts' bytes once between them either way (the router is on
// both). An int4 group of 128 would cut a rank's 64 columns: refused before anything is
// allocated (the slab size is asked first at start-up), naming --enable-expert-parallel.
TEST(MoeStaging, TensorParallelShardsTheExperts) {
  const fs::path d = make_moe("tp");
  auto ck = Checkpoint::open(d.string());
  auto backend = make_reference_backend();
  for (bool ep : {false, true}) {
    SCOPED_TRACE(ep ? "expert parallel" : "columns split");
    for (int rank = 0; rank < 2; ++rank) {
      Qwen3Weights w = stage_qwen3_weights(
          *ck, *backend, {.tp_rank = rank, .tp_size = 2, .show_progress = false, .expert_parallel = ep});
      const Qwen3LayerWeights& L = w.layers[0];
      EXPECT_EQ(L.router.n_out, 8) << "every rank routes over every expert";
      EXPECT_EQ(L.experts.size(), ep ? 4u : 8u);
      EXPECT_EQ(L.expert_first, ep ? 4 * rank : 0);
      EXPECT_EQ(w.moe_inter, ep ? 128 : 64);
      EXPECT_EQ(L.experts[0].down.k_in, ep ? 128 : 64);
    }
  }
  StagedFormats f = staged_formats(*ck, WeightFormat::Int4, 128);
  try {
    staged_slab_bytes(*ck, *backend, 0, 2, -1, &f);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("would hold 64 input columns (moe_intermediate_size 128 / 2), not a multiple "
                                         "of the int4 group of 128 inputs; use --enable-expert-parallel"),
              std::string::npos)
        << e.what();
  }
  f.expert_parallel = true;
  EXPECT_GT(staged_slab_bytes(*ck, *backend, 0, 2, -1, &f), 0u);
  fs::remove_all(d);
}
