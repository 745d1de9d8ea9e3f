// Qwen3.5 hybrid checkpoints from make-test-model: the wrapper and text-only layouts validate and
// stage (mixer per layer_types, (1 + w) norms, the GDN norm plain, −exp(A_log), fused experts),
// and a checkpoint that does not match its config.json is refused naming the tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "checkpoint_test_util.h"
#include "core/dtype.h"
#include "kernels/backend.h"
#include "model/qwen3_next_layout.h"

namespace pypto::test {
namespace {

float first_value(const Checkpoint& ck, const std::string& name) {
  const TensorRef& r = ck.get(name);
  return load_as_f32(r.data(), r.info->dtype, 0);
}

TEST(HybridCheckpoint, WrapperLayoutStagesEveryLayerKind) {
  TestModelOptions o;
  o.preset = "tiny-hybrid";
  const auto dir = make_model_in_temp("hybrid_wrapper", o);
  auto ck = Checkpoint::open(dir.string());
  EXPECT_EQ(open_error(dir), "");
  EXPECT_EQ(ck->get("model.language_model.layers.0.linear_attn.A_log").info->dtype, DType::F32);
  EXPECT_NE(ck->find("model.visual.merger.linear_fc2.weight"), nullptr);
  auto be = make_reference_backend();
  StagingOptions so;
  so.show_progress = false;
  const Qwen3Weights w = stage_qwen3_weights(*ck, *be, so);
  ASSERT_EQ(w.layers.size(), 4u);
  EXPECT_EQ(w.layers[0].mixer, LayerMixer::GatedDeltaNet);
  EXPECT_EQ(w.layers[1].mixer, LayerMixer::GatedAttention);
  const std::string p = "model.language_model.layers.";
  EXPECT_FLOAT_EQ(w.layers[0].input_norm[0], 1.0f + first_value(*ck, p + "0.input_layernorm.weight"));
  EXPECT_FLOAT_EQ(w.layers[1].q_norm[0], 1.0f + first_value(*ck, p + "1.self_attn.q_norm.weight"));
  EXPECT_FLOAT_EQ(w.final_norm[0], 1.0f + first_value(*ck, "model.language_model.norm.weight"));
  EXPECT_FLOAT_EQ(w.layers[0].gdn.norm[0], first_value(*ck, p + "0.linear_attn.norm.weight")) << "plain weight";
  const float a_log1 = load_as_f32(ck->get(p + "0.linear_attn.A_log").data(), DType::F32, 1);
  EXPECT_FLOAT_EQ(w.layers[0].gdn.neg_exp_a[1], -std::exp(a_log1));
  // qkv of the gated layer: [q (4 · 32) | k (2 · 32) | v (2 · 32) | gate (4 · 32)] rows.
  EXPECT_EQ(w.layers[1].qkv.n_out, 4 * 32 + 2 * 2 * 32 + 4 * 32);
  EXPECT_EQ(w.layers[0].gdn.in_proj.n_out, (2 * 2 * 16 + 4 * 32) + 4 * 32 + 2 * 4);
  EXPECT_TRUE(w.embed_in_lm_head) << "tiny-hybrid is tied, like Qwen3.5-0.8B";
}

TEST(HybridCheckpoint, TextOnlyMoeStagesFusedExpertsAndSharedExpert) {
  TestModelOptions o;
  o.preset = "tiny-hybrid-moe";
  o.text_only = true;
  const auto dir = make_model_in_temp("hybrid_moe_text", o);
  auto ck = Checkpoint::open(dir.string());
  EXPECT_EQ(ck->config().architecture, "Qwen3_5MoeForCausalLM");
  EXPECT_NE(ck->find("model.layers.0.mlp.experts.gate_up_proj"), nullptr);
  auto be = make_reference_backend();
  StagingOptions so;
  so.show_progress = false;
  const Qwen3Weights w = stage_qwen3_weights(*ck, *be, so);
  for (const Qwen3LayerWeights& l : w.layers) {
    EXPECT_TRUE(l.sparse);
    EXPECT_EQ(l.experts.size(), 8u);
    EXPECT_EQ(l.shared_expert.gate_up.n_out, 2 * 48);
    EXPECT_EQ(l.shared_expert.gate.n_out, 1);
  }
  // Expert 3's staged gate_up row 0 is the fused tensor's [3, 0, :] (the reference backend keeps
  // the plain layout).
  const TensorRef& gu = ck->get("model.layers.0.mlp.experts.gate_up_proj");
  const uint16_t* src = reinterpret_cast<const uint16_t*>(gu.data()) + 3 * 2 * 32 * 64;
  const uint16_t* dst = static_cast<const uint16_t*>(w.layers[0].experts[3].gate_up.data);
  EXPECT_EQ(0, std::memcmp(src, dst, 2 * 32 * 64 * sizeof(uint16_t)));
  // --tp 2, rank 1: half the heads, GDN heads, expert and shared-expert columns and vocabulary;
  // the staged bytes are what staged_slab_bytes predicts for that rank.
  so.tp_size = 2;
  so.tp_rank = 1;
  const Qwen3Weights r1 = stage_qwen3_weights(*ck, *be, so);
  const ModelConfig& c = ck->config();
  EXPECT_EQ(r1.n_heads, c.num_attention_heads / 2);
  EXPECT_EQ(r1.vocab_begin + r1.vocab_rows, c.vocab_size);
  for (const Qwen3LayerWeights& l : r1.layers) {
    EXPECT_EQ(l.experts[3].gate_up.n_out, 32);  // 2 x 32 / 2
    EXPECT_EQ(l.experts[3].down.k_in, 16);
    EXPECT_EQ(l.shared_expert.down.k_in, 24);
    EXPECT_EQ(l.router.n_out, 8);  // every rank routes with the whole router
    if (l.mixer == LayerMixer::GatedDeltaNet) {
      EXPECT_EQ(l.gdn.in_proj.n_out, (c.gdn_conv_dim() + c.gdn_value_dim() + 2 * c.linear_num_value_heads) / 2);
      EXPECT_EQ(l.gdn.out_proj.k_in, c.gdn_value_dim() / 2);
    }
  }
  // Rank 1's expert 3 gate rows start at the fused tensor's [3, 16, :] (its second half of the
  // intermediate columns).
  const uint16_t* src1 = reinterpret_cast<const uint16_t*>(gu.data()) + (3 * 2 * 32 + 16) * 64;
  EXPECT_EQ(0, std::memcmp(src1, r1.layers[0].experts[3].gate_up.data, 16 * 64 * sizeof(uint16_t)));
  EXPECT_EQ(r1.resident_bytes, staged_slab_bytes(*ck, *be, 1, 2, -1, nullptr));
  // --enable-expert-parallel: rank 1 holds experts 4..7 whole (their full 32 intermediate
  // columns), the shared expert still split by columns.
  so.expert_parallel = true;
  const Qwen3Weights ep1 = stage_qwen3_weights(*ck, *be, so);
  for (const Qwen3LayerWeights& l : ep1.layers) {
    EXPECT_EQ(l.expert_first, 4);
    ASSERT_EQ(l.experts.size(), 4u);
    EXPECT_EQ(l.experts[0].gate_up.n_out, 2 * 32);
    EXPECT_EQ(l.experts[0].down.k_in, 32);
    EXPECT_EQ(l.shared_expert.down.k_in, 24);
  }
  const uint16_t* src4 = reinterpret_cast<const uint16_t*>(gu.data()) + 4 * 2 * 32 * 64;  // [4, 0, :]
  EXPECT_EQ(0, std::memcmp(src4, ep1.layers[0].experts[0].gate_up.data, 2 * 32 * 64 * sizeof(uint16_t)));
  StagedFormats ep_formats = staged_formats(*ck, WeightFormat::Float, 64);
  ep_formats.expert_parallel = true;
  EXPECT_EQ(ep1.resident_bytes, staged_slab_bytes(*ck, *be, 1, 2, -1, &ep_formats));
  // --pp: the second stage of two holds layers [2, 4), the final norm and lm_head, no embedding.
  so.expert_parallel = false;
  so.tp_size = 1;
  so.tp_rank = 0;
  so.layer_begin = c.num_hidden_layers / 2;
  so.layer_end = c.num_hidden_layers;
  const Qwen3Weights st1 = stage_qwen3_weights(*ck, *be, so);
  EXPECT_EQ(st1.layer_begin, c.num_hidden_layers / 2);
  EXPECT_EQ(int(st1.layers.size()), c.num_hidden_layers - c.num_hidden_layers / 2);
  EXPECT_FALSE(st1.has_embed);
  EXPECT_TRUE(st1.has_head);
  EXPECT_NE(st1.final_norm, nullptr);
  EXPECT_EQ(st1.resident_bytes,
            staged_slab_bytes(*ck, *be, 0, 1, -1, nullptr, {c.num_hidden_layers / 2, c.num_hidden_layers}));
  so.layer_begin = 0;
  so.layer_end = c.num_hidden_layers / 2;
  const Qwen3Weights st0 = stage_qwen3_weights(*ck, *be, so);
  EXPECT_TRUE(st0.has_embed);
  EXPECT_FALSE(st0.has_head);
  EXPECT_EQ(st0.resident_bytes, staged_slab_bytes(*ck, *be, 0, 1, -1, nullptr, {0, c.num_hidden_layers / 2}));
}

// --quantization int4 on a hybrid: the projections (attention, the GDN's qkv | z and out_proj,
// experts, shared expert), lm_head and the embedding are int4; the GDN's b | a rows, the router
// and the shared expert's gate stay float; the staged bytes are what hybrid_staged_bytes predicts.
TEST(HybridCheckpoint, QuantizedStagingKeepsTheGatesFloat) {
  TestModelOptions o;
  o.preset = "tiny-hybrid-moe";
  o.text_only = true;
  const auto dir = make_model_in_temp("hybrid_moe_quant", o);
  auto ck = Checkpoint::open(dir.string());
  const ModelConfig& c = ck->config();
  auto be = make_reference_backend();
  StagingOptions so;
  so.show_progress = false;
  so.quantization = WeightFormat::Int4;
  so.int4_group = 16;
  const Qwen3Weights w = stage_qwen3_weights(*ck, *be, so);
  EXPECT_EQ(w.weight_formats, "int4/g16");
  EXPECT_EQ(w.lm_head.format, WeightFormat::Int4);
  const int64_t nv = c.linear_num_value_heads;
  int gdn = 0;
  for (const Qwen3LayerWeights& l : w.layers) {
    EXPECT_EQ(l.router.format, WeightFormat::Float);
    EXPECT_EQ(l.shared_expert.gate.format, WeightFormat::Float);
    EXPECT_EQ(l.shared_expert.gate_up.format, WeightFormat::Int4);
    EXPECT_EQ(l.experts[0].gate_up.format, WeightFormat::Int4);
    EXPECT_EQ(l.experts[0].gate_up.group, 16);
    if (l.mixer != LayerMixer::GatedDeltaNet) {
      EXPECT_EQ(l.qkv.format, WeightFormat::Int4);
      continue;
    }
    ++gdn;
    EXPECT_EQ(l.gdn.in_proj.format, WeightFormat::Int4);
    EXPECT_EQ(l.gdn.in_proj.n_out, c.gdn_conv_dim() + c.gdn_value_dim());
    EXPECT_EQ(l.gdn.in_proj_ba.format, WeightFormat::Float);
    EXPECT_EQ(l.gdn.in_proj_ba.n_out, 2 * nv);
    EXPECT_EQ(l.gdn.out_proj.format, WeightFormat::Int4);
  }
  EXPECT_GT(gdn, 0);
  const StagedFormats f = staged_formats(*ck, so.quantization, so.int4_group);
  EXPECT_EQ(w.resident_bytes, staged_slab_bytes(*ck, *be, 0, 1, -1, &f));
  // Float staging is larger than int4's.
  EXPECT_GT(staged_slab_bytes(*ck, *be, 0, 1, -1, nullptr), w.resident_bytes);
}

// --speculative-config method mtp stages the MTP head beside the target: its bytes are in the
// start-up estimate (StagedFormats::mtp), float and int4, and only on the rank with the lm_head.
TEST(HybridCheckpoint, TheMtpHeadIsInTheStagedBytesEstimate) {
  TestModelOptions o;
  o.preset = "tiny-hybrid-moe";
  o.text_only = true;
  o.mtp = "random";
  const auto dir = make_model_in_temp("hybrid_moe_mtp_bytes", o);
  auto ck = Checkpoint::open(dir.string());
  auto be = make_reference_backend();
  for (const WeightFormat q : {WeightFormat::Float, WeightFormat::Int4}) {
    StagingOptions so;
    so.show_progress = false;
    so.quantization = q;
    so.int4_group = 16;
    so.mtp = true;
    const Qwen3Weights w = stage_qwen3_weights(*ck, *be, so);
    ASSERT_TRUE(w.mtp.present);
    StagedFormats f = staged_formats(*ck, q, so.int4_group);
    const size_t without = staged_slab_bytes(*ck, *be, 0, 1, -1, &f);
    f.mtp = true;
    EXPECT_EQ(w.resident_bytes, staged_slab_bytes(*ck, *be, 0, 1, -1, &f)) << f.describe();
    EXPECT_GT(w.resident_bytes, without) << f.describe();
    // A first pipeline stage (no lm_head) does not hold the head.
    const int n = ck->config().num_hidden_layers;
    StagedFormats plain = f;
    plain.mtp = false;
    EXPECT_EQ(staged_slab_bytes(*ck, *be, 0, 1, -1, &f, {0, n / 2}),
              staged_slab_bytes(*ck, *be, 0, 1, -1, &plain, {0, n / 2}));
  }
}

TEST(HybridCheckpoint, RefusesLayerTypesThatDisagreeWithTheTensors) {
  TestModelOptions o;
  o.preset = "tiny-hybrid";
  const auto dir = make_model_in_temp("hybrid_mismatch", o);
  edit_config(dir, [](nlohmann::json& j) {
    j["text_config"]["layer_types"] = {"full_attention", "linear_attention", "linear_attention", "full_attention"};
  });
  const std::string e = open_error(dir);
  EXPECT_NE(e.find("model.language_model.layers.0.self_attn.q_proj.weight: missing"), std::string::npos) << e;
  EXPECT_NE(e.find("model.language_model.layers.0.linear_attn.in_proj_qkv.weight: not part of the model"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("layers.1.linear_attn.in_proj_qkv.weight: missing"), std::string::npos) << e;
}

TEST(HybridCheckpoint, RefusesAMisshapenGdnTensorNamingIt) {
  TestModelOptions o;
  o.preset = "tiny-hybrid";
  const auto dir = make_model_in_temp("hybrid_shape", o);
  edit_config(dir, [](nlohmann::json& j) { j["text_config"]["linear_num_value_heads"] = 2; });
  const std::string e = open_error(dir);
  EXPECT_NE(e.find("layers.0.linear_attn.in_proj_b.weight: shape [4, 64], expected [2, 64]"), std::string::npos) << e;
}

// Qwen3-Next's in_proj_qkvz / in_proj_ba rows per key head g (r = 2 value heads per key head,
// d_k 16, d_v 32: groups of 2·16 + 2·2·32 = 160 rows): q_g at 160 g, k_g at 160 g + 16, v at
// 160 g + 32 (64 rows), z at 160 g + 96; b_g at 4 g, a_g at 4 g + 2 (2 rows each).
TEST(HybridCheckpoint, Qwen3NextRowsRegroupPerKeyHead) {
  ModelConfig c;
  c.linear_num_key_heads = 2;
  c.linear_num_value_heads = 4;
  c.linear_key_head_dim = 16;
  c.linear_value_head_dim = 32;
  auto pairs = [](const std::vector<RowRange>& v) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const RowRange& r : v) out.emplace_back(r.begin, r.rows);
    return out;
  };
  using P = std::vector<std::pair<int64_t, int64_t>>;
  const GroupedGdnRows all = qwen3_next_gdn_rows(c, 0, 2);
  EXPECT_EQ(pairs(all.qkvz), (P{{0, 16}, {160, 16}, {16, 16}, {176, 16}, {32, 64}, {192, 64}, {96, 64}, {256, 64}}));
  EXPECT_EQ(pairs(all.ba), (P{{0, 2}, {4, 2}, {2, 2}, {6, 2}}));
  const GroupedGdnRows rank1 = qwen3_next_gdn_rows(c, 1, 1);  // --tp 2, rank 1: key head 1, value heads 2, 3
  EXPECT_EQ(pairs(rank1.qkvz), (P{{160, 16}, {176, 16}, {192, 64}, {256, 64}}));
  EXPECT_EQ(pairs(rank1.ba), (P{{4, 2}, {6, 2}}));
}

TEST(HybridCheckpoint, Qwen3NextStagesTheGroupedProjections) {
  TestModelOptions o;
  o.preset = "tiny-next";
  const auto dir = make_model_in_temp("qwen3_next", o);
  auto ck = Checkpoint::open(dir.string());
  EXPECT_EQ(ck->config().architecture, "Qwen3NextForCausalLM");
  EXPECT_EQ(ck->get("model.layers.0.linear_attn.in_proj_qkvz.weight").info->shape, (Shape{2 * 2 * 16 + 2 * 4 * 32, 64}));
  EXPECT_EQ(ck->get("model.layers.0.linear_attn.in_proj_ba.weight").info->shape, (Shape{8, 64}));
  EXPECT_NE(ck->find("model.layers.0.mlp.experts.7.down_proj.weight"), nullptr) << "per-expert tensors";
  auto be = make_reference_backend();
  StagingOptions so;
  so.show_progress = false;
  const Qwen3Weights w = stage_qwen3_weights(*ck, *be, so);
  EXPECT_EQ(w.layers[0].gdn.in_proj.n_out, (2 * 2 * 16 + 4 * 32) + 4 * 32 + 2 * 4);
  EXPECT_EQ(w.layers[1].mixer, LayerMixer::GatedAttention);
  EXPECT_EQ(w.layers[0].experts.size(), 8u);
  // A Qwen3.5-style in_proj_qkv in a Qwen3-Next checkpoint is named, as is the missing fused one.
  edit_config(dir, [](nlohmann::json& j) {
    j["architectures"] = {"Qwen3_5MoeForCausalLM"};
    j["model_type"] = "qwen3_5_moe_text";
  });
  const std::string e = open_error(dir);
  EXPECT_NE(e.find("layers.0.linear_attn.in_proj_qkv.weight: missing"), std::string::npos) << e;
  EXPECT_NE(e.find("layers.0.linear_attn.in_proj_qkvz.weight: not part of the model"), std::string::npos) << e;
}

// Qwen3-Next with dense layers (make-test-model --preset tiny-next-dense: decoder_sparse_step 2,
// mlp_only_layers [3]): only layer 1 stages experts, the others (and the MTP layer, the rule at
// layer 0) the dense MLP; float and int4, one rank and rank 1 of --tp 2, the staged bytes are
// what staged_slab_bytes predicts. A config whose pattern disagrees with the tensors is refused
// naming them.
TEST(HybridCheckpoint, Qwen3NextDenseLayersStageAsTheLayerRuleSays) {
  TestModelOptions o;
  o.preset = "tiny-next-dense";
  o.mtp = "random";
  const auto dir = make_model_in_temp("qwen3_next_dense", o);
  auto ck = Checkpoint::open(dir.string());
  const ModelConfig& c = ck->config();
  ASSERT_EQ(c.decoder_sparse_step, 2);
  ASSERT_EQ(c.mlp_only_layers, (std::vector<int32_t>{3}));
  EXPECT_NE(ck->find("model.layers.0.mlp.gate_proj.weight"), nullptr);
  EXPECT_NE(ck->find("model.layers.1.mlp.experts.7.down_proj.weight"), nullptr);
  EXPECT_NE(ck->find("mtp.layers.0.mlp.down_proj.weight"), nullptr) << "the MTP layer is dense too";
  auto be = make_reference_backend();
  for (const WeightFormat q : {WeightFormat::Float, WeightFormat::Int4}) {
    for (const int tp : {1, 2}) {
      StagingOptions so;
      so.show_progress = false;
      so.quantization = q;
      so.int4_group = 8;  // divides a rank's share of the shared expert (48 / 2)
      so.mtp = true;
      so.tp_size = tp;
      so.tp_rank = tp - 1;
      const Qwen3Weights w = stage_qwen3_weights(*ck, *be, so);
      const std::string what = str_cat(q == WeightFormat::Float ? "float" : "int4", " tp ", tp);
      ASSERT_EQ(w.layers.size(), 4u);
      for (int i = 0; i < 4; ++i) {
        const Qwen3LayerWeights& l = w.layers[size_t(i)];
        EXPECT_EQ(l.sparse, i == 1) << what << " layer " << i;
        if (l.sparse) {
          EXPECT_EQ(l.experts.size(), 8u) << what;
          EXPECT_EQ(l.shared_expert.down.k_in, 48 / tp) << what;
        } else {
          EXPECT_EQ(l.gate_up.n_out, 2 * 128 / tp) << what << " layer " << i;
          EXPECT_EQ(l.down.k_in, 128 / tp) << what << " layer " << i;
          EXPECT_TRUE(l.experts.empty()) << what;
        }
      }
      ASSERT_TRUE(w.mtp.present);
      EXPECT_FALSE(w.mtp.layer.sparse) << what;
      EXPECT_EQ(w.mtp.layer.gate_up.n_out, 2 * 128 / tp) << what;
      StagedFormats f = staged_formats(*ck, q, so.int4_group);
      f.mtp = true;
      EXPECT_EQ(w.resident_bytes, staged_slab_bytes(*ck, *be, tp - 1, tp, -1, &f)) << what;
    }
  }
  // mlp_only_layers [1, 3]: layer 1 is dense by the config but stored sparse.
  edit_config(dir, [](nlohmann::json& j) { j["mlp_only_layers"] = {1, 3}; });
  std::string e = open_error(dir);
  EXPECT_NE(e.find("model.layers.1.mlp.gate_proj.weight: missing"), std::string::npos) << e;
  EXPECT_NE(e.find("model.layers.1.mlp.gate.weight: not part of the model"), std::string::npos) << e;
  // Every layer sparse (the published pattern): the dense layers' experts are missing.
  edit_config(dir, [](nlohmann::json& j) {
    j["mlp_only_layers"] = nlohmann::json::array();
    j["decoder_sparse_step"] = 1;
  });
  e = open_error(dir);
  EXPECT_NE(e.find("model.layers.0.mlp.gate.weight: missing"), std::string::npos) << e;
  EXPECT_NE(e.find("model.layers.0.mlp.gate_proj.weight: not part of the model"), std::string::npos) << e;
}

// A pre-quantized hybrid (make-test-model --quant-format fp8 / gptq): the projections stay in the
// checkpoint's format, the GDN's b | a, the router, the shared expert's gate and lm_head float,
// and the staged bytes are what staged_slab_bytes predicts; FP8 codes without an fp8
// quantization_config are refused naming the tensor.
TEST(HybridCheckpoint, PrequantizedStagingKeepsTheStoredFormats) {
  for (QuantMethod m : {QuantMethod::Fp8, QuantMethod::Gptq}) {
    TestModelOptions o;
    o.preset = "tiny-hybrid-moe";
    o.text_only = true;
    o.quant = m;
    if (m == QuantMethod::Gptq) o.dtype = DType::F16;
    const auto dir = make_model_in_temp(str_cat("hybrid_moe_", quant_method_name(m)), o);
    auto ck = Checkpoint::open(dir.string());
    EXPECT_EQ(open_error(dir), "");
    const WeightFormat want = m == QuantMethod::Fp8 ? WeightFormat::Fp8 : WeightFormat::Int4;
    auto be = make_reference_backend();
    StagingOptions so;
    so.show_progress = false;
    const Qwen3Weights w = stage_qwen3_weights(*ck, *be, so);
    EXPECT_EQ(w.lm_head.format, WeightFormat::Float);
    for (const Qwen3LayerWeights& l : w.layers) {
      EXPECT_EQ(l.router.format, WeightFormat::Float);
      EXPECT_EQ(l.shared_expert.gate.format, WeightFormat::Float);
      EXPECT_EQ(l.shared_expert.gate_up.format, want);
      EXPECT_EQ(l.experts[7].down.format, want);
      if (l.mixer == LayerMixer::GatedDeltaNet) {
        EXPECT_EQ(l.gdn.in_proj.format, want);
        EXPECT_EQ(l.gdn.in_proj_ba.format, WeightFormat::Float);
        EXPECT_EQ(l.gdn.out_proj.format, want);
      } else {
        EXPECT_EQ(l.qkv.format, want);
      }
    }
    const StagedFormats f = staged_formats(*ck, WeightFormat::Float, 64);
    EXPECT_EQ(w.resident_bytes, staged_slab_bytes(*ck, *be, 0, 1, -1, &f)) << quant_method_name(m);
    if (m != QuantMethod::Fp8) continue;
    edit_config(dir, [](nlohmann::json& j) { j.erase("quantization_config"); });
    const std::string e = open_error(dir);
    EXPECT_NE(e.find("model.layers.0.linear_attn.in_proj_qkv.weight: stored F8_E4M3, but config.json's "
                     "quantization_config is none"),
              std::string::npos)
        << e;
  }
}

}  // namespace
}  // namespace pypto::test
