#include "model/test_model_hybrid.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/progress.h"
#include "io/json_fields.h"
#include "io/safetensors.h"
#include "model/qwen35_chat_template.h"
#include "model/test_model_quant.h"

namespace fs = std::filesystem;

namespace pypto {
namespace {

using test_model_detail::fill_uniform;
using test_model_detail::name_seed;

struct HybridPreset {
  const char* name;
  int64_t hidden, inter;
  int layers, heads, kv_heads, head_dim;
  int interval;  // full_attention_interval
  int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim;
  bool tie;
  int experts = 0, top_k = 0;
  int64_t moe_inter = 0, shared_inter = 0;
  bool next = false;  // Qwen3NextForCausalLM: fused per-key-head GDN projections, Qwen3's vocabulary
  // Qwen3-Next's layer pattern (ModelConfig::sparse_layer): decoder_sparse_step, and one layer
  // listed in mlp_only_layers (-1: none).
  int sparse_step = 1, dense_layer = -1;
};

// The published shapes (docs/status.md, issue 36): Qwen3.5-0.8B, Qwen3.6-27B (= Qwen3.5-27B) and
// Qwen3.6-35B-A3B (= Qwen3.5-35B-A3B); head_dim 256, partial rotary 0.25, d_k = d_v = 128, conv
// kernel 4, one full-attention layer in four. The tiny ones are ours, for fast tests: every
// other layer full attention (so KV layers and GDN layers interleave), 2 key heads serving 4
// value heads (the h // r grouping matters), d_k 16 ≠ d_v 32 (a transposed state cannot pass),
// rotary 8 of head_dim 32.
constexpr HybridPreset kHybridPresets[] = {
    {"tiny-hybrid", 64, 128, 4, 4, 2, 32, 2, 2, 4, 16, 32, true},
    {"tiny-hybrid-moe", 64, 0, 4, 4, 2, 32, 2, 2, 4, 16, 32, false, 8, 2, 32, 48},
    {"qwen3.5-0.8b", 1024, 3584, 24, 8, 2, 256, 4, 16, 16, 128, 128, true},
    {"qwen3.6-27b", 5120, 17408, 64, 24, 4, 256, 4, 16, 48, 128, 128, false},
    {"qwen3.6-35b-a3b", 2048, 0, 40, 16, 2, 256, 4, 16, 32, 128, 128, false, 256, 8, 512, 512},
    // Qwen3-Next-80B-A3B (transformers' Qwen3NextConfig defaults = the published config), and a
    // tiny one of the same kind (tiny-hybrid-moe's shapes).
    {"qwen3-next-80b-a3b", 2048, 5120, 48, 16, 2, 256, 4, 16, 32, 128, 128, false, 512, 10, 512, 512, true},
    {"tiny-next", 64, 128, 4, 4, 2, 32, 2, 2, 4, 16, 32, false, 8, 2, 32, 48, true},
    // tiny-next with dense MLP layers as Qwen3NextConfig allows them: decoder_sparse_step 2 and
    // mlp_only_layers [3], so only layer 1 is sparse; layers 0 and 2 (GDN) and 3 (attention) run
    // the dense MLP of intermediate_size, and so does the MTP layer (the rule at layer 0).
    {"tiny-next-dense", 64, 128, 4, 4, 2, 32, 2, 2, 4, 16, 32, false, 8, 2, 32, 48, true, 2, 3},
};
constexpr int64_t kQwen3NextVocab = 151936;
constexpr int64_t kQwen35Vocab = 248320;
constexpr int kConvKernel = 4;
constexpr double kPartialRotary = 0.25;

const HybridPreset* find(const std::string& name) {
  for (const auto& p : kHybridPresets)
    if (name == p.name) return &p;
  return nullptr;
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f) fail(p.string(), ": cannot write");
}

// The MTP block (fact sheet §3.6): mtp.pre_fc_norm_{embedding,hidden} [H], mtp.fc [H, 2H] (input:
// the normed embedding, then the normed hidden), one gated full-attention layer mtp.layers.0.*
// with the target's shapes and a dense FFN or (MoE) a router, per-expert 2-D experts and a shared
// expert, and mtp.norm [H]. Oracle checkpoints (test_model.h): fc = [I | 0], pre_fc_norm_embedding
// 0 (unit gain), zero output projections in the layer, mtp.norm = the target's final norm (drawn
// from the same seed as `target_norm`) or, perturbed, redrawn wider; "oracle-hidden": fc =
// [I | I/8], the oracle's mtp.norm.
// proj / out_proj write a projection [out, in] (random / the oracle's zero output projection) in
// the checkpoint's format, so a pre-quantized checkpoint's head is quantized like its layers; fc
// stays in --dtype (keep_fc: lists it as not converted) so the oracle's [I | 0] is exact.
using ProjWriter = std::function<void(const std::string&, Shape)>;
void add_mtp_head(const ModelConfig& c, const TestModelOptions& opt, int64_t H, float gamma_std,
                  const std::string& target_norm, std::vector<SafetensorWrite>& tensors, const ProjWriter& proj,
                  const ProjWriter& out_proj, const std::function<void(const std::string&)>& keep_fc) {
  const float sqrt3 = std::sqrt(3.0f);
  const DType dt = opt.dtype;
  const bool oracle = opt.mtp != "random";
  auto add_from = [&](const std::string& name, const std::string& seed_name, Shape shape, float center, float std) {
    const int64_t n = shape_numel(shape);
    const uint64_t s = name_seed(opt.seed, seed_name);
    tensors.push_back({name, dt, shape, [=](uint8_t* dst) { fill_uniform(dst, dt, n, s, center, std * sqrt3); }});
  };
  auto add = [&](const std::string& name, Shape shape, float center, float std) { add_from(name, name, shape, center, std); };
  const std::string m = "mtp.", l = "mtp.layers.0.";
  keep_fc(m + "fc");
  add(m + "pre_fc_norm_embedding.weight", {H}, 0.0f, oracle ? 0.0f : gamma_std);
  add(m + "pre_fc_norm_hidden.weight", {H}, 0.0f, gamma_std);
  if (oracle) {
    // [I | 0]: output channel i reads embedding channel i. "oracle-hidden": [I | I/8], so channel i
    // also reads hidden channel i at 1/8 (exact in every --dtype): the draft is the oracle's token
    // for x_{t+1} moved by h_t, which some rows flip — drafts that depend on the right hidden row.
    const bool hidden = opt.mtp == "oracle-hidden";
    tensors.push_back({m + "fc.weight", dt, {H, 2 * H}, [=](uint8_t* dst) {
                         std::memset(dst, 0, size_t(H * 2 * H) * dtype_size(dt));
                         const size_t es = dtype_size(dt);
                         auto put = [&](int64_t at, float v) {  // v is 1 or 1/8: exact in f32, bf16, f16
                           uint8_t* e = dst + size_t(at) * es;
                           if (dt == DType::F32) {
                             std::memcpy(e, &v, sizeof v);
                           } else {
                             uint32_t bits;
                             std::memcpy(&bits, &v, sizeof bits);
                             const uint16_t half = dt == DType::BF16 ? uint16_t(bits >> 16)  // exact: low bits 0
                                                                     : uint16_t(v == 1.0f ? 0x3C00 : 0x3000);
                             std::memcpy(e, &half, sizeof half);
                           }
                         };
                         for (int64_t i = 0; i < H; ++i) {
                           put(i * 2 * H + i, 1.0f);
                           if (hidden) put(i * 2 * H + H + i, 0.125f);
                         }
                       }});
  } else {
    add(m + "fc.weight", {H, 2 * H}, 0.0f, 1.0f / std::sqrt(static_cast<float>(2 * H)));
  }
  add(l + "input_layernorm.weight", {H}, 0.0f, gamma_std);
  add(l + "post_attention_layernorm.weight", {H}, 0.0f, gamma_std);
  proj(l + "self_attn.q_proj.weight", {2 * c.q_size(), H});  // per head: query rows, then gate rows
  proj(l + "self_attn.k_proj.weight", {c.kv_size(), H});
  proj(l + "self_attn.v_proj.weight", {c.kv_size(), H});
  out_proj(l + "self_attn.o_proj.weight", {H, c.q_size()});
  add(l + "self_attn.q_norm.weight", {c.head_dim}, 0.0f, gamma_std);
  add(l + "self_attn.k_norm.weight", {c.head_dim}, 0.0f, gamma_std);
  if (!c.sparse_layer(0)) {  // the MTP layer's FFN: the config's rule at layer 0 (vLLM's index)
    proj(l + "mlp.gate_proj.weight", {c.intermediate_size, H});
    proj(l + "mlp.up_proj.weight", {c.intermediate_size, H});
    out_proj(l + "mlp.down_proj.weight", {H, c.intermediate_size});
  } else {
    const int64_t mI = c.moe_intermediate_size, sI = c.shared_expert_intermediate_size;
    add(l + "mlp.gate.weight", {c.num_experts, H}, 0.0f, 1.0f / std::sqrt(static_cast<float>(H)));
    keep_fc(l + "mlp.gate");
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string x = l + "mlp.experts." + std::to_string(e) + ".";
      proj(x + "gate_proj.weight", {mI, H});
      proj(x + "up_proj.weight", {mI, H});
      out_proj(x + "down_proj.weight", {H, mI});
    }
    proj(l + "mlp.shared_expert.gate_proj.weight", {sI, H});
    proj(l + "mlp.shared_expert.up_proj.weight", {sI, H});
    out_proj(l + "mlp.shared_expert.down_proj.weight", {H, sI});
    add(l + "mlp.shared_expert_gate.weight", {1, H}, 0.0f, 1.0f / std::sqrt(static_cast<float>(H)));
    keep_fc(l + "mlp.shared_expert_gate");
  }
  if (opt.mtp == "oracle" || opt.mtp == "oracle-hidden") add_from(m + "norm.weight", target_norm, {H}, 0.0f, gamma_std);  // the same values
  else add(m + "norm.weight", {H}, 0.0f, opt.mtp == "oracle-perturbed" ? 4 * gamma_std : gamma_std);
}

constexpr int32_t kFp8Block = 128;  // Qwen's weight_block_size [128, 128]

// The 4-bit group along in_features: `requested`, or the largest power of two from 128 down
// that divides every quantized projection's in_features.
int32_t hybrid_int4_group(const ModelConfig& c, int32_t requested) {
  std::vector<int64_t> ins = {c.hidden_size, c.q_size(), c.gdn_value_dim()};
  if (c.has_sparse_layers()) {
    ins.push_back(c.moe_intermediate_size);
    ins.push_back(c.shared_expert_intermediate_size);
  }
  if (c.has_dense_layers()) ins.push_back(c.intermediate_size);
  auto divides_all = [&](int64_t g) {
    for (int64_t in : ins)
      if (in % g) return false;
    return true;
  };
  if (requested > 0) {
    if (!divides_all(requested))
      fail("--quant-group ", requested, " does not divide every quantized projection's in_features");
    return requested;
  }
  for (int32_t g = 128; g >= 8; g /= 2)
    if (divides_all(g)) return g;
  fail("no 4-bit group size from 128 down to 8 divides every projection's in_features");
}

}  // namespace

std::vector<std::string> hybrid_test_model_presets() {
  std::vector<std::string> v;
  for (const auto& p : kHybridPresets) v.push_back(p.name);
  return v;
}

bool is_hybrid_test_model_preset(const std::string& name) { return find(name) != nullptr; }

ModelConfig hybrid_test_model_config(const std::string& preset) {
  const HybridPreset* p = find(preset);
  PYPTO_ASSERT(p != nullptr, preset);
  ModelConfig c;
  const bool moe = p->experts > 0;
  c.arch = moe ? ModelArch::Qwen35Moe : ModelArch::Qwen35;
  c.architecture = p->next ? "Qwen3NextForCausalLM"
                   : moe   ? "Qwen3_5MoeForConditionalGeneration"
                           : "Qwen3_5ForConditionalGeneration";
  c.multimodal_wrapper = !p->next;
  c.tensor_prefix = p->next ? "model." : "model.language_model.";
  c.vocab_size = p->next ? kQwen3NextVocab : kQwen35Vocab;
  c.hidden_size = p->hidden;
  c.intermediate_size = p->inter;
  c.num_hidden_layers = p->layers;
  c.num_attention_heads = p->heads;
  c.num_key_value_heads = p->kv_heads;
  c.head_dim = p->head_dim;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000000.0;
  c.rotary_dim = static_cast<int32_t>(p->head_dim * kPartialRotary);
  c.max_position_embeddings = 262144;
  c.tie_word_embeddings = p->tie;
  c.linear_num_key_heads = p->lin_k_heads;
  c.linear_num_value_heads = p->lin_v_heads;
  c.linear_key_head_dim = p->lin_k_dim;
  c.linear_value_head_dim = p->lin_v_dim;
  c.linear_conv_kernel_dim = kConvKernel;
  c.full_attention.assign(size_t(p->layers), 0);
  for (int i = 0; i < p->layers; ++i) c.full_attention[size_t(i)] = (i + 1) % p->interval == 0;
  if (moe) {
    c.num_experts = p->experts;
    c.num_experts_per_tok = p->top_k;
    c.moe_intermediate_size = p->moe_inter;
    c.shared_expert_intermediate_size = p->shared_inter;
    c.norm_topk_prob = true;
    c.decoder_sparse_step = p->sparse_step;
    if (p->dense_layer >= 0) c.mlp_only_layers = {p->dense_layer};
  }
  // Qwen3's special-token ids: the tokenizer files written beside are Qwen3's.
  c.bos_token_ids = {151643};
  c.eos_token_ids = {151645};
  return c;
}

void make_hybrid_test_model(const TestModelOptions& opt) {
  const HybridPreset& p = *find(opt.preset);
  ModelConfig c = hybrid_test_model_config(opt.preset);
  if (opt.layers) {
    if (*opt.layers < 1) fail("--layers must be at least 1, got ", *opt.layers);
    c.num_hidden_layers = *opt.layers;
    c.full_attention.assign(size_t(c.num_hidden_layers), 0);
    for (int i = 0; i < c.num_hidden_layers; ++i) c.full_attention[size_t(i)] = (i + 1) % p.interval == 0;
    std::erase_if(c.mlp_only_layers, [&](int32_t i) { return i >= c.num_hidden_layers; });
  }
  if (opt.qwen2 || !opt.qk_norm || opt.outlier_channels != 0)
    fail("preset ", opt.preset, " is a hybrid: --qwen2, --no-qk-norm and --outlier-channels do not apply to it");
  const bool int4 = opt.quant == QuantMethod::Awq || opt.quant == QuantMethod::Gptq;
  if (!int4 && opt.quant_group != 0) fail("--quant-group applies to --quant-format awq and gptq only");
  if (opt.shards != 1) fail("preset ", opt.preset, ": --shards is not supported for the hybrid presets yet (one file)");
  if (opt.dtype != DType::BF16 && opt.dtype != DType::F16 && opt.dtype != DType::F32)
    fail("--dtype must be bf16, f16 or f32");
  if (opt.out_dir.empty()) fail("--out DIR is required");
  // Oracle MTP checkpoints write lm_head apart from the embedding: tied, the target's next token
  // would be the current one (a row's best match is itself), and every draft trivially right.
  if (opt.mtp != "random") c.tie_word_embeddings = false;
  const std::string tok_dir = qwen3_tokenizer_dir();
  fs::create_directories(opt.out_dir);
  const fs::path out(opt.out_dir);

  const bool moe = c.arch == ModelArch::Qwen35Moe;
  const int64_t H = c.hidden_size, V = c.vocab_size, hd = c.head_dim;
  const int64_t value_dim = c.gdn_value_dim(), conv_dim = c.gdn_conv_dim();
  const int64_t nv = c.linear_num_value_heads;
  const bool next = p.next, text_only = opt.text_only || next;  // Qwen3-Next has only the CausalLM layout
  const std::string P = text_only ? "model." : "model.language_model.";

  // Init: projections uniform with std 1/sqrt(fan_in); zero-centred norms (the (1 + w) ones)
  // 0 ± 0.2 and the GDN output norm 1 ± 0.2, so a norm read the wrong way is visible; A_log in
  // [-1, 1] (decays exp(-A·softplus(·)) neither ~1 nor ~0); dt_bias ± 0.5; conv taps of std 0.5.
  const float sqrt3 = std::sqrt(3.0f);
  std::vector<SafetensorWrite> tensors;
  auto add_dt = [&](const std::string& name, DType dt, Shape shape, float center, float std) {
    const int64_t n = shape_numel(shape);
    const uint64_t s = name_seed(opt.seed, name);
    tensors.push_back({name, dt, shape, [=](uint8_t* dst) { fill_uniform(dst, dt, n, s, center, std * sqrt3); }});
  };
  auto add = [&](const std::string& name, Shape shape, float center, float std) {
    add_dt(name, opt.dtype, std::move(shape), center, std);
  };
  auto proj = [&](const std::string& name, Shape shape) {
    add(name, shape, 0.0f, 1.0f / std::sqrt(static_cast<float>(shape.back())));
  };
  // --quant-format fp8 | awq | gptq: the projections pre-quantized (test_model_quant.h), as Qwen's
  // *-FP8 releases and the AWQ / GPTQ-Int4 ones; the GDN's b / a projections, the router, the
  // shared expert's gate, the embedding and lm_head stay in --dtype (listed in
  // modules_to_not_convert).
  const bool fp8 = opt.quant == QuantMethod::Fp8, quant = opt.quant != QuantMethod::None;
  const int32_t group = fp8 ? kFp8Block : int4 ? hybrid_int4_group(c, opt.quant_group) : 0;
  nlohmann::ordered_json not_converted = nlohmann::ordered_json::array({"lm_head"});
  auto qproj = [&](const std::string& name, Shape shape) {
    if (!quant) return proj(name, shape);
    const float a = sqrt3 / std::sqrt(static_cast<float>(shape.back()));
    add_quantized_projection(tensors, opt.quant, name, shape[0], shape[1], group, name_seed(opt.seed, name), a);
  };
  auto keep = [&](const std::string& name, Shape shape) {  // a projection left unquantized
    proj(name, shape);
    if (quant) not_converted.push_back(name.substr(0, name.size() - 7));
  };
  const float gamma_std = 0.2f / sqrt3;
  if (opt.mtp != "random" && opt.mtp != "oracle" && opt.mtp != "oracle-perturbed" && opt.mtp != "oracle-hidden")
    fail("--mtp must be random, oracle, oracle-perturbed or oracle-hidden, got \"", opt.mtp, "\"");
  // oracle checkpoints: the output projections of every mixer and FFN are zero (see test_model.h).
  const bool oracle = opt.mtp != "random";
  // Zero stays exactly zero through every --quant-format's writer (a zero group or tile gets a
  // nonzero scale and zero codes), so an oracle checkpoint can be pre-quantized too.
  auto out_proj = [&](const std::string& name, Shape shape) {
    if (!oracle) return qproj(name, shape);
    if (!quant) return add(name, shape, 0.0f, 0.0f);
    add_quantized_projection(tensors, opt.quant, name, shape[0], shape[1], group, name_seed(opt.seed, name), 0.0f);
  };
  add(P + "embed_tokens.weight", {V, H}, 0.0f, 2.0f / std::sqrt(static_cast<float>(H)));
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string l = P + "layers." + std::to_string(i) + ".";
    add(l + "input_layernorm.weight", {H}, 0.0f, gamma_std);
    add(l + "post_attention_layernorm.weight", {H}, 0.0f, gamma_std);
    if (c.full_attention_layer(i)) {
      qproj(l + "self_attn.q_proj.weight", {2 * c.q_size(), H});  // per head: query rows, then gate rows
      qproj(l + "self_attn.k_proj.weight", {c.kv_size(), H});
      qproj(l + "self_attn.v_proj.weight", {c.kv_size(), H});
      out_proj(l + "self_attn.o_proj.weight", {H, c.q_size()});
      add(l + "self_attn.q_norm.weight", {hd}, 0.0f, gamma_std);
      add(l + "self_attn.k_norm.weight", {hd}, 0.0f, gamma_std);
    } else {
      const std::string g = l + "linear_attn.";
      if (next) {  // per key head [q | k | v | z] and [b | a] (model/qwen3_next_layout.h)
        qproj(g + "in_proj_qkvz.weight", {conv_dim + value_dim, H});
        keep(g + "in_proj_ba.weight", {2 * nv, H});
      } else {
        qproj(g + "in_proj_qkv.weight", {conv_dim, H});
        qproj(g + "in_proj_z.weight", {value_dim, H});
        keep(g + "in_proj_b.weight", {nv, H});
        keep(g + "in_proj_a.weight", {nv, H});
      }
      add(g + "conv1d.weight", {conv_dim, 1, kConvKernel}, 0.0f, 0.5f);
      add(g + "dt_bias", {nv}, 0.0f, 0.5f / sqrt3);
      add_dt(g + "A_log", DType::F32, {nv}, 0.0f, 1.0f / sqrt3);  // f32 in the published checkpoints
      add(g + "norm.weight", {c.linear_value_head_dim}, 1.0f, gamma_std);
      out_proj(g + "out_proj.weight", {H, value_dim});
    }
    if (!c.sparse_layer(i)) {
      qproj(l + "mlp.gate_proj.weight", {c.intermediate_size, H});
      qproj(l + "mlp.up_proj.weight", {c.intermediate_size, H});
      out_proj(l + "mlp.down_proj.weight", {H, c.intermediate_size});
      continue;
    }
    const int64_t E = c.num_experts, mI = c.moe_intermediate_size, sI = c.shared_expert_intermediate_size;
    keep(l + "mlp.gate.weight", {E, H});
    if (next || quant) {  // Qwen3-Next's checkpoints (and pre-quantized ones) store each expert's 2-D projections
      for (int64_t e = 0; e < E; ++e) {
        const std::string x = l + "mlp.experts." + std::to_string(e) + ".";
        qproj(x + "gate_proj.weight", {mI, H});
        qproj(x + "up_proj.weight", {mI, H});
        out_proj(x + "down_proj.weight", {H, mI});
      }
    } else {
      proj(l + "mlp.experts.gate_up_proj", {E, 2 * mI, H});  // gate rows [0, I), up rows [I, 2I)
      out_proj(l + "mlp.experts.down_proj", {E, H, mI});
    }
    qproj(l + "mlp.shared_expert.gate_proj.weight", {sI, H});
    qproj(l + "mlp.shared_expert.up_proj.weight", {sI, H});
    out_proj(l + "mlp.shared_expert.down_proj.weight", {H, sI});
    keep(l + "mlp.shared_expert_gate.weight", {1, H});
  }
  add(P + "norm.weight", {H}, 0.0f, gamma_std);
  add_mtp_head(c, opt, H, gamma_std, P + "norm.weight", tensors, qproj, out_proj, [&](const std::string& stem) {
    if (quant) not_converted.push_back(stem);
  });
  if (!c.tie_word_embeddings) add("lm_head.weight", {V, H}, 0.0f, 2.0f / std::sqrt(static_cast<float>(H)));
  // A stand-in for the vision tower: the loader must skip model.visual.* (wrapper layout only).
  if (!text_only) add("model.visual.merger.linear_fc2.weight", {H, 16}, 0.0f, 0.25f);

  size_t total = 0;
  for (const auto& t : tensors) total += static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
  Progress progress(str_cat("make-test-model ", opt.preset), 1, opt.show_progress ? total : 0);
  write_safetensors((out / "model.safetensors").string(), tensors);
  progress.advance(1, total);
  progress.finish();
  fs::remove(out / "model.safetensors.index.json");

  const char* dtype_name_hf = opt.dtype == DType::BF16 ? "bfloat16" : opt.dtype == DType::F16 ? "float16" : "float32";
  nlohmann::ordered_json layer_types = nlohmann::ordered_json::array();
  for (int i = 0; i < c.num_hidden_layers; ++i) layer_types.push_back(c.full_attention_layer(i) ? "full_attention" : "linear_attention");
  nlohmann::ordered_json text = {
      {"model_type", moe ? "qwen3_5_moe_text" : "qwen3_5_text"},
      {"vocab_size", V},
      {"hidden_size", H},
      {"num_hidden_layers", c.num_hidden_layers},
      {"layer_types", layer_types},
      {"full_attention_interval", p.interval},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", hd},
      {"attention_bias", false},
      {"attn_output_gate", true},
      {"linear_num_key_heads", c.linear_num_key_heads},
      {"linear_num_value_heads", c.linear_num_value_heads},
      {"linear_key_head_dim", c.linear_key_head_dim},
      {"linear_value_head_dim", c.linear_value_head_dim},
      {"linear_conv_kernel_dim", c.linear_conv_kernel_dim},
      {"hidden_act", "silu"},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_parameters",
       {{"rope_type", "default"},
        {"rope_theta", c.rope_theta},
        {"partial_rotary_factor", kPartialRotary},
        {"mrope_section", {11, 11, 10}},
        {"mrope_interleaved", true}}},
      {"max_position_embeddings", c.max_position_embeddings},
      {"mamba_ssm_dtype", "float32"},
      {"mtp_num_hidden_layers", 1},
      {"mtp_use_dedicated_embeddings", false},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"dtype", dtype_name_hf},
      {"bos_token_id", 151643},
      {"eos_token_id", 151645},
  };
  if (moe) {
    text["num_experts"] = c.num_experts;
    text["num_experts_per_tok"] = c.num_experts_per_tok;
    text["moe_intermediate_size"] = c.moe_intermediate_size;
    text["shared_expert_intermediate_size"] = c.shared_expert_intermediate_size;
  } else {
    text["intermediate_size"] = c.intermediate_size;
  }
  const nlohmann::ordered_json marker = {{"preset", opt.preset}, {"seed", opt.seed}, {"random_weights", true},
                                         {"tokenizer", "Qwen3's (the real vocabulary is 248,320 rows as here)"}};
  nlohmann::ordered_json cfg;
  if (next) {
    // The keys and values of Qwen3-Next-80B-A3B's config.json (transformers' Qwen3NextConfig):
    // full_attention_interval instead of layer_types, top-level rope_theta and
    // partial_rotary_factor, norm_topk_prob, decoder_sparse_step and mlp_only_layers.
    cfg = {{"architectures", {"Qwen3NextForCausalLM"}},
           {"model_type", "qwen3_next"},
           {"vocab_size", V},
           {"hidden_size", H},
           {"intermediate_size", c.intermediate_size},  // the dense layers' (unused when every layer is sparse)
           {"num_hidden_layers", c.num_hidden_layers},
           {"full_attention_interval", p.interval},
           {"num_attention_heads", c.num_attention_heads},
           {"num_key_value_heads", c.num_key_value_heads},
           {"head_dim", hd},
           {"attention_bias", false},
           {"attention_dropout", 0.0},
           {"linear_num_key_heads", c.linear_num_key_heads},
           {"linear_num_value_heads", c.linear_num_value_heads},
           {"linear_key_head_dim", c.linear_key_head_dim},
           {"linear_value_head_dim", c.linear_value_head_dim},
           {"linear_conv_kernel_dim", c.linear_conv_kernel_dim},
           {"hidden_act", "silu"},
           {"rms_norm_eps", c.rms_norm_eps},
           {"rope_theta", c.rope_theta},
           {"partial_rotary_factor", kPartialRotary},
           {"rope_scaling", nullptr},
           {"max_position_embeddings", c.max_position_embeddings},
           {"num_experts", c.num_experts},
           {"num_experts_per_tok", c.num_experts_per_tok},
           {"moe_intermediate_size", c.moe_intermediate_size},
           {"shared_expert_intermediate_size", c.shared_expert_intermediate_size},
           {"norm_topk_prob", true},
           {"decoder_sparse_step", c.decoder_sparse_step},
           {"mlp_only_layers", c.mlp_only_layers},
           {"tie_word_embeddings", c.tie_word_embeddings},
           {"torch_dtype", dtype_name_hf},
           {"bos_token_id", 151643},
           {"eos_token_id", 151645}};
  } else if (opt.text_only) {
    cfg = {{"architectures", {moe ? "Qwen3_5MoeForCausalLM" : "Qwen3_5ForCausalLM"}}};
    for (auto it = text.begin(); it != text.end(); ++it) cfg[it.key()] = it.value();
  } else {
    cfg = {{"architectures", {moe ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5ForConditionalGeneration"}},
           {"model_type", moe ? "qwen3_5_moe" : "qwen3_5"},
           {"text_config", text},
           {"vision_config", {{"model_type", moe ? "qwen3_5_moe_vision" : "qwen3_5_vision"}}},
           {"tie_word_embeddings", c.tie_word_embeddings}};
  }
  cfg["pypto_test_model"] = marker;
  // At the top level, as transformers writes it for the wrapper too (io/quant_config.h's fields).
  if (fp8)
    cfg["quantization_config"] = {{"activation_scheme", "dynamic"},
                                  {"fmt", "e4m3"},
                                  {"quant_method", "fp8"},
                                  {"weight_block_size", {kFp8Block, kFp8Block}},
                                  {"modules_to_not_convert", not_converted}};
  if (opt.quant == QuantMethod::Awq)
    cfg["quantization_config"] = {{"bits", 4},          {"group_size", group}, {"modules_to_not_convert", not_converted},
                                  {"quant_method", "awq"}, {"version", "gemm"}, {"zero_point", true}};
  if (opt.quant == QuantMethod::Gptq)
    cfg["quantization_config"] = {{"bits", 4},          {"group_size", group},       {"desc_act", false},
                                  {"sym", true},         {"quant_method", "gptq"},    {"checkpoint_format", "gptq"},
                                  {"modules_to_not_convert", not_converted}};
  if (quant) cfg["pypto_test_model"]["quant_format"] = quant_method_name(opt.quant);
  write_text(out / "config.json", cfg.dump(2) + "\n");
  nlohmann::ordered_json gen = {{"bos_token_id", 151643}, {"eos_token_id", {151645, 151643}}, {"do_sample", false}};
  write_text(out / "generation_config.json", gen.dump(2) + "\n");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(fs::path(tok_dir) / f, out / f, fs::copy_options::overwrite_existing);
  // Qwen3.5's chat template replaces Qwen3's, so a served hybrid test model thinks by default and
  // is asked for XML tool calls as the real checkpoints are. Qwen3-Next keeps Qwen3's files.
  if (next) return;
  nlohmann::ordered_json tc = nlohmann::ordered_json::parse(read_text_file((out / "tokenizer_config.json").string()));
  tc["chat_template"] = qwen35_chat_template();
  write_text(out / "tokenizer_config.json", tc.dump(2) + "\n");
}

}  // namespace pypto
