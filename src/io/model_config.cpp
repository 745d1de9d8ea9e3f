#include "io/model_config.h"

#include <algorithm>
#include <climits>
#include <optional>

#include "core/error.h"
#include "io/hybrid_config.h"
#include "io/json_fields.h"
#include "io/moe_layer_pattern.h"

namespace pypto {

// eos_token_id / bos_token_id may be an integer or a list of integers (generation_config.json).
static std::vector<int32_t> read_id_list(const JsonFields& f, const char* key) {
  std::vector<int32_t> ids;
  if (!f.has(key)) return ids;
  const auto& v = f.at(key);
  auto push = [&](const nlohmann::json& e) {
    if (!e.is_number_integer()) f.bad(key, "an integer or a list of integers");
    int64_t id = e.get<int64_t>();
    if (id < 0 || id > INT32_MAX) fail(f.path(), ": field '", key, "' holds ", id, ", not a token id");
    ids.push_back(static_cast<int32_t>(id));
  };
  if (v.is_array()) {
    for (const auto& e : v) push(e);
  } else {
    push(v);
  }
  return ids;
}

static int32_t positive_int(const JsonFields& f, const char* key, int64_t v) {
  if (v <= 0 || v > (int64_t(1) << 31) - 1)
    fail(f.path(), ": field '", key, "' must be a positive integer, got ", v);
  return static_cast<int32_t>(v);
}

// The Qwen3-MoE fields (transformers' Qwen3MoeConfig). Published configs write every one of
// them; the routing shape (experts, top-k, expert width) is required, the layer pattern and
// norm_topk_prob take the class defaults (every layer sparse; no renormalisation).
static void parse_moe_fields(const JsonFields& f, ModelConfig& c) {
  const std::string& path = f.path();
  // v4 writes num_experts; v5 serialises the same value as num_local_experts.
  std::optional<int64_t> e = f.opt_int("num_experts"), local = f.opt_int("num_local_experts");
  if (e && local && *e != *local)
    fail(path, ": fields 'num_experts' (", *e, ") and 'num_local_experts' (", *local, ") disagree");
  if (!e && !local) fail(path, ": missing field 'num_experts' (or 'num_local_experts'): the routed experts per layer");
  const char* experts_key = e ? "num_experts" : "num_local_experts";
  const int64_t experts = e ? *e : *local;
  if (experts < 0 || experts > INT32_MAX) fail(path, ": field '", experts_key, "' must be >= 0, got ", experts);
  c.num_experts = static_cast<int32_t>(experts);
  const int64_t k = f.req_int("num_experts_per_tok");
  if (c.num_experts > 0 && (k < 1 || k > c.num_experts))
    fail(path, ": field 'num_experts_per_tok' is ", k, "; it must be in [1, ", experts_key, " = ", c.num_experts, "]");
  c.num_experts_per_tok = static_cast<int32_t>(std::max<int64_t>(0, std::min<int64_t>(k, INT32_MAX)));
  c.moe_intermediate_size = positive_int(f, "moe_intermediate_size", f.req_int("moe_intermediate_size"));
  parse_moe_layer_pattern(f, c);
  c.norm_topk_prob = f.opt_bool("norm_topk_prob").value_or(false);
  // Qwen2-MoE's shared expert does not exist in Qwen3-MoE; a config that asks for one is another model.
  if (auto v = f.opt_int("shared_expert_intermediate_size"); v && *v != 0)
    fail(path, ": field 'shared_expert_intermediate_size' is ", *v,
         "; Qwen3-MoE has no shared expert (only 0 is supported)");
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& path) {
  nlohmann::json j = parse_json_object(json_text, path);
  JsonFields f(j, path);
  ModelConfig c;

  // architectures: ["Qwen3ForCausalLM"] (Qwen2ForCausalLM differs by q/k/v biases and no QK norm)
  if (!j.contains("architectures")) f.bad("architectures", "a list with one architecture name");
  const auto& archs = j.at("architectures");
  if (!archs.is_array() || archs.size() != 1 || !archs[0].is_string())
    f.bad("architectures", "a list with one architecture name");
  c.architecture = archs[0].get<std::string>();
  if (is_hybrid_architecture(c.architecture)) return parse_hybrid_config(j, path);
  if (c.architecture == "Qwen3ForCausalLM") {
    c.arch = ModelArch::Qwen3;
  } else if (c.architecture == "Qwen2ForCausalLM") {
    c.arch = ModelArch::Qwen2;
  } else if (c.architecture == "Qwen3MoeForCausalLM") {
    c.arch = ModelArch::Qwen3Moe;
  } else if (c.architecture == "Qwen3ForSequenceClassification") {  // the reranker (io/pooling_config.h)
    parse_sequence_classification(f, c);
  } else {
    fail(path, ": architecture '", c.architecture,
         "' is not supported (supported: Qwen3ForCausalLM, Qwen2ForCausalLM, Qwen3MoeForCausalLM, ",
         hybrid_architecture_list(), ")");
  }
  if (c.arch == ModelArch::Qwen3Moe) {
    if (auto t = f.opt_string("model_type"); t && *t != "qwen3_moe")
      fail(path, ": field 'model_type' is '", *t, "' but architectures names Qwen3MoeForCausalLM (model_type qwen3_moe)");
  }
  // Every supported architecture's MLP (and expert) is SwiGLU: down(silu(gate) * up).
  if (auto act = f.opt_string("hidden_act"); act && *act != "silu")
    fail(path, ": field 'hidden_act' is '", *act, "'; only silu is supported");

  c.vocab_size = positive_int(f, "vocab_size", f.req_int("vocab_size"));
  c.hidden_size = positive_int(f, "hidden_size", f.req_int("hidden_size"));
  c.num_hidden_layers = positive_int(f, "num_hidden_layers", f.req_int("num_hidden_layers"));
  if (c.arch == ModelArch::Qwen3Moe) parse_moe_fields(f, c);
  // The dense MLP's width: a Qwen3-MoE model whose layers are all sparse never uses it.
  if (c.has_dense_layers() || f.has("intermediate_size"))
    c.intermediate_size = positive_int(f, "intermediate_size", f.req_int("intermediate_size"));
  c.num_attention_heads = positive_int(f, "num_attention_heads", f.req_int("num_attention_heads"));
  c.num_key_value_heads = c.num_attention_heads;
  if (auto v = f.opt_int("num_key_value_heads")) c.num_key_value_heads = positive_int(f, "num_key_value_heads", *v);
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(path, ": num_attention_heads (", c.num_attention_heads, ") must be a multiple of num_key_value_heads (",
         c.num_key_value_heads, ")");
  if (auto v = f.opt_int("head_dim")) {
    c.head_dim = positive_int(f, "head_dim", *v);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      fail(path, ": no head_dim and hidden_size (", c.hidden_size, ") is not a multiple of num_attention_heads (",
           c.num_attention_heads, ")");
    c.head_dim = static_cast<int32_t>(c.hidden_size / c.num_attention_heads);
  }
  if (c.head_dim % 2 != 0) fail(path, ": head_dim must be even for rotary embeddings, got ", c.head_dim);

  c.rms_norm_eps = f.req_number("rms_norm_eps");
  if (!(c.rms_norm_eps > 0)) fail(path, ": field 'rms_norm_eps' must be > 0, got ", c.rms_norm_eps);
  c.rope_theta = f.opt_number("rope_theta").value_or(10000.0);
  if (!(c.rope_theta > 0)) fail(path, ": field 'rope_theta' must be > 0, got ", c.rope_theta);
  c.max_position_embeddings = positive_int(f, "max_position_embeddings", f.req_int("max_position_embeddings"));
  c.tie_word_embeddings = f.opt_bool("tie_word_embeddings").value_or(false);

  // RoPE scaling: rope_scaling (transformers v4) or rope_parameters (v5, which also carries
  // rope_theta). Plain RoPE and YaRN are implemented (io/rope_scaling.h); others are refused.
  const char* rope_key = f.has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  if (f.has("rope_parameters") && j.at("rope_parameters").is_object() && j.at("rope_parameters").contains("rope_theta")) {
    const auto& t = j.at("rope_parameters").at("rope_theta");
    if (!t.is_number() || !(t.get<double>() > 0)) fail(path, ": rope_parameters.rope_theta must be a number > 0");
    c.rope_theta = t.get<double>();
  }
  if (f.has(rope_key)) c.rope_scaling = parse_rope_scaling(j.at(rope_key), c.max_position_embeddings, path);

  // Qwen3 has no q/k/v biases unless attention_bias says so; Qwen2 always has them.
  if (c.arch == ModelArch::Qwen2) {
    c.attention_bias = true;
    c.qk_norm = false;
  } else {
    c.attention_bias = f.opt_bool("attention_bias").value_or(false);
    c.qk_norm = true;
  }

  if (auto s = f.opt_string("torch_dtype")) {
    if (!dtype_parse(*s, &c.torch_dtype) || (c.torch_dtype != DType::BF16 && c.torch_dtype != DType::F16 &&
                                             c.torch_dtype != DType::F32))
      fail(path, ": field 'torch_dtype' is '", *s, "' (allowed: bfloat16, float16, float32)");
  }
  if (f.has("quantization_config")) c.quant = parse_quant_config(j.at("quantization_config"), path);
  c.bos_token_ids = read_id_list(f, "bos_token_id");
  c.eos_token_ids = read_id_list(f, "eos_token_id");
  for (int32_t id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size) fail(path, ": eos_token_id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")");
  return c;
}

bool ModelConfig::sparse_layer(int32_t i) const {
  if (num_experts <= 0 || (i + 1) % decoder_sparse_step != 0) return false;
  return std::find(mlp_only_layers.begin(), mlp_only_layers.end(), i) == mlp_only_layers.end();
}

int32_t ModelConfig::num_full_attention_layers() const {
  if (!hybrid()) return num_hidden_layers;
  int32_t n = 0;
  for (uint8_t f : full_attention) n += f != 0;
  return n;
}

bool ModelConfig::has_sparse_layers() const {
  for (int32_t i = 0; i < num_hidden_layers; ++i)
    if (sparse_layer(i)) return true;
  return false;
}

bool ModelConfig::has_dense_layers() const {
  for (int32_t i = 0; i < num_hidden_layers; ++i)
    if (!sparse_layer(i)) return true;
  return false;
}

void merge_generation_config(ModelConfig& cfg, const std::string& json_text, const std::string& path) {
  nlohmann::json j = parse_json_object(json_text, path);
  JsonFields f(j, path);
  for (int32_t id : read_id_list(f, "eos_token_id")) {
    if (id < 0 || id >= cfg.vocab_size)
      fail(path, ": eos_token_id ", id, " is outside the vocabulary [0, ", cfg.vocab_size, ")");
    bool seen = false;
    for (int32_t e : cfg.eos_token_ids) seen |= e == id;
    if (!seen) cfg.eos_token_ids.push_back(id);
  }
}

}  // namespace pypto
