#include "io/hybrid_config.h"

#include <climits>
#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "io/json_fields.h"
#include "io/moe_layer_pattern.h"
#include "io/rope_scaling.h"

namespace pypto {
namespace {

struct HybridArch {
  const char* name;
  bool moe, wrapper;
  const char* model_type;  // the top-level model_type config.json must carry (when present)
  bool next = false;       // Qwen3-Next: in_proj_qkvz / in_proj_ba grouped per key head
};
constexpr HybridArch kArchs[] = {
    {"Qwen3_5ForConditionalGeneration", false, true, "qwen3_5"},
    {"Qwen3_5MoeForConditionalGeneration", true, true, "qwen3_5_moe"},
    {"Qwen3_5ForCausalLM", false, false, "qwen3_5_text"},
    {"Qwen3_5MoeForCausalLM", true, false, "qwen3_5_moe_text"},
    {"Qwen3NextForCausalLM", true, false, "qwen3_next", true},
};

int32_t positive(const JsonFields& f, const char* key, int64_t v) {
  if (v <= 0 || v > INT32_MAX) fail(f.path(), ": field '", key, "' must be a positive integer, got ", v);
  return static_cast<int32_t>(v);
}
int32_t req_positive(const JsonFields& f, const char* key) { return positive(f, key, f.req_int(key)); }

std::vector<int32_t> id_list(const JsonFields& f, const char* key) {
  std::vector<int32_t> ids;
  if (!f.has(key)) return ids;
  const nlohmann::json& v = f.at(key);
  auto push = [&](const nlohmann::json& e) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > INT32_MAX)
      f.bad(key, "a token id or a list of token ids");
    ids.push_back(static_cast<int32_t>(e.get<int64_t>()));
  };
  if (v.is_array()) {
    for (const auto& e : v) push(e);
  } else {
    push(v);
  }
  return ids;
}

// layer_types, or the pattern full_attention_interval implies (transformers' __post_init__).
void parse_layer_types(const JsonFields& t, ModelConfig& c) {
  const std::string& path = t.path();
  c.full_attention.assign(size_t(c.num_hidden_layers), 0);
  if (t.has("layer_types")) {
    const nlohmann::json& lt = t.at("layer_types");
    if (!lt.is_array()) t.bad("layer_types", "a list of \"linear_attention\" / \"full_attention\"");
    if (int64_t(lt.size()) != c.num_hidden_layers)
      fail(path, ": field 'layer_types' lists ", lt.size(), " layers but num_hidden_layers is ", c.num_hidden_layers);
    for (size_t i = 0; i < lt.size(); ++i) {
      const std::string s = lt[i].is_string() ? lt[i].get<std::string>() : lt[i].dump();
      if (s == "full_attention") c.full_attention[i] = 1;
      else if (s != "linear_attention")
        fail(path, ": field 'layer_types' entry ", i, " is ", lt[i].dump(),
             " (allowed: \"linear_attention\", \"full_attention\")");
    }
    return;
  }
  const int32_t interval =
      t.has("full_attention_interval") ? positive(t, "full_attention_interval", t.req_int("full_attention_interval")) : 4;
  for (int32_t i = 0; i < c.num_hidden_layers; ++i) c.full_attention[size_t(i)] = (i + 1) % interval == 0;
}

// rope_parameters (transformers v5) with top-level rope_theta / partial_rotary_factor as the
// fallback older JSONs write (Qwen3-Next's v4 config: those two at the top level and rope_scaling
// for the scaling). MRoPE sections are accepted because text positions are equal in all three
// streams (plain partial RoPE). The scaling: "default", or "yarn" as for dense Qwen3
// (io/rope_scaling.h), over the rotary dims only: transformers' _compute_yarn_parameters takes
// dim = int(head_dim · partial_rotary_factor) for the frequencies, the correction range and the
// ramp, which is what the engine's rope over rotary_dim-wide heads computes (model/hybrid_blocks.h).
// max_position_embeddings must be read first (YaRN's default original context).
void parse_rope(const JsonFields& t, ModelConfig& c) {
  const std::string& path = t.path();
  double theta = t.opt_number("rope_theta").value_or(10000.0);
  // The classes' default (Qwen3_5TextConfig, Qwen3_5MoeTextConfig, Qwen3NextConfig set
  // partial_rotary_factor 0.25 unless given), which transformers copies into rope_parameters
  // when that lacks the key: so 0.25 wherever neither place names it.
  double factor = t.opt_number("partial_rotary_factor").value_or(0.25);
  const bool has_params = t.has("rope_parameters"), has_scaling = t.has("rope_scaling");
  if (has_params && has_scaling)
    fail(path, ": fields 'rope_parameters' and 'rope_scaling' are both set (", t.at("rope_scaling").dump(),
         "); give the scaling in rope_parameters only (e.g. \"rope_type\": \"yarn\", \"factor\", "
         "\"original_max_position_embeddings\")");
  const char* key = has_params ? "rope_parameters" : "rope_scaling";
  nlohmann::json scaling;  // the object parse_rope_scaling reads: YaRN's fields (and rope_theta)
  if (has_params || has_scaling) {
    const nlohmann::json& rp = t.at(key);
    if (!rp.is_object()) t.bad(key, "an object");
    const std::string where = str_cat(path, ": ", key);
    JsonFields r(rp, where);
    std::string type = "default";
    for (const char* k : {"type", "rope_type"})  // "type" is the older spelling
      if (r.has(k)) type = r.req_string(k);
    if (type != "default" && type != "yarn")
      fail(path, ": field '", key, ".", r.has("rope_type") ? "rope_type" : "type", "' is '", type,
           "' (supported: default, yarn; linear, dynamic, llama3 and longrope are not)");
    if (auto v = r.opt_number("rope_theta")) theta = *v;
    if (has_params) {
      if (auto v = r.opt_number("partial_rotary_factor")) factor = *v;
    }
    if (r.has("mrope_section")) {
      const nlohmann::json& ms = r.at("mrope_section");
      if (!ms.is_array()) r.bad("mrope_section", "a list of integers");
      for (const auto& e : ms)
        if (!e.is_number_integer() || e.get<int64_t>() < 0) r.bad("mrope_section", "a list of integers");
    }
    if (r.has("mrope_interleaved") && !r.at("mrope_interleaved").is_boolean()) r.bad("mrope_interleaved", "a boolean");
    // rope_parameters also holds the hybrids' own keys, read above, which are not YaRN fields (in
    // the v4 rope_scaling they would be out of place, and are refused as unknown YaRN fields).
    scaling = rp;
    if (has_params)
      for (const char* k : {"partial_rotary_factor", "mrope_section", "mrope_interleaved"}) scaling.erase(k);
    c.rope_scaling = parse_rope_scaling(scaling, c.max_position_embeddings, path);
  }
  if (!(theta > 0)) fail(path, ": rope_theta must be > 0, got ", theta);
  if (!(factor > 0 && factor <= 1)) fail(path, ": partial_rotary_factor must be in (0, 1], got ", factor);
  c.rope_theta = theta;
  const int32_t rot = static_cast<int32_t>(double(c.head_dim) * factor);  // int() as transformers
  if (rot < 2 || rot % 2 != 0)
    fail(path, ": partial_rotary_factor ", factor, " of head_dim ", c.head_dim, " gives ", rot,
         " rotary dims; they must be even and at least 2");
  c.rotary_dim = rot;
}

void parse_moe(const JsonFields& t, ModelConfig& c, bool next) {
  const std::string& path = t.path();
  if (next) {
    // Qwen3NextConfig: layer i runs the sparse MoE block iff num_experts > 0, (i + 1) %
    // decoder_sparse_step == 0 and i is not in mlp_only_layers, else a dense SwiGLU MLP of
    // intermediate_size (Qwen3NextDecoderLayer); ModelConfig::sparse_layer is that rule.
    const int64_t e = t.req_int("num_experts");
    if (e < 0 || e > INT32_MAX) fail(path, ": field 'num_experts' must be >= 0, got ", e);
    c.num_experts = static_cast<int32_t>(e);
    parse_moe_layer_pattern(t, c);
    c.norm_topk_prob = t.opt_bool("norm_topk_prob").value_or(true);  // Qwen3NextTopKRouter's flag
    if (!c.has_sparse_layers()) return;  // every layer dense: the routing fields are unused
  } else {
    c.num_experts = req_positive(t, "num_experts");
    // Qwen3.5-MoE removed these (every layer sparse, the top-k always renormalised): a config
    // asking otherwise describes another model.
    if (auto v = t.opt_bool("norm_topk_prob"); v && !*v)
      fail(path, ": field 'norm_topk_prob' is false; Qwen3.5-MoE always renormalises its top-k (only true is supported)");
    c.norm_topk_prob = true;
    if (auto v = t.opt_int("decoder_sparse_step"); v && *v != 1)
      fail(path, ": field 'decoder_sparse_step' is ", *v, "; Qwen3.5-MoE has no such setting (every layer is sparse; ",
           "only 1 is accepted)");
    if (t.has("mlp_only_layers") && !(t.at("mlp_only_layers").is_array() && t.at("mlp_only_layers").empty()))
      fail(path, ": field 'mlp_only_layers' lists dense layers; Qwen3.5-MoE has no such setting (every layer is sparse; ",
           "only [] is accepted)");
    c.decoder_sparse_step = 1;
  }
  const int64_t k = t.req_int("num_experts_per_tok");
  if (k < 1 || k > c.num_experts)
    fail(path, ": field 'num_experts_per_tok' is ", k, "; it must be in [1, num_experts = ", c.num_experts, "]");
  c.num_experts_per_tok = static_cast<int32_t>(k);
  c.moe_intermediate_size = req_positive(t, "moe_intermediate_size");
  c.shared_expert_intermediate_size = req_positive(t, "shared_expert_intermediate_size");
}

}  // namespace

bool is_hybrid_architecture(const std::string& name) {
  for (const HybridArch& a : kArchs)
    if (name == a.name) return true;
  return false;
}

const char* hybrid_architecture_list() {
  return "Qwen3_5ForConditionalGeneration, Qwen3_5MoeForConditionalGeneration, Qwen3_5ForCausalLM, "
         "Qwen3_5MoeForCausalLM, Qwen3NextForCausalLM";
}

ModelConfig parse_hybrid_config(const nlohmann::json& j, const std::string& path) {
  JsonFields top(j, path);
  const std::string name = j.at("architectures")[0].get<std::string>();
  const HybridArch* arch = nullptr;
  for (const HybridArch& a : kArchs)
    if (name == a.name) arch = &a;
  PYPTO_ASSERT(arch != nullptr, name);
  ModelConfig c;
  c.architecture = name;
  c.arch = arch->moe ? ModelArch::Qwen35Moe : ModelArch::Qwen35;
  c.multimodal_wrapper = arch->wrapper;
  c.tensor_prefix = arch->wrapper ? "model.language_model." : "model.";
  // Text-only configs may call themselves qwen3_5 too (transformers' text config is written
  // either way); the wrapper must be the wrapper's type.
  if (auto mt = top.opt_string("model_type"); mt && arch->next) {
    if (*mt != arch->model_type)
      fail(path, ": field 'model_type' is '", *mt, "' but architectures names ", name, " (model_type qwen3_next)");
  } else if (mt) {
    const std::string base = arch->moe ? "qwen3_5_moe" : "qwen3_5";
    if (arch->wrapper ? *mt != base : (*mt != base && *mt != base + "_text"))
      fail(path, ": field 'model_type' is '", *mt, "' but architectures names ", name, " (model_type ", base,
           arch->wrapper ? "" : str_cat(" or ", base, "_text"), ")");
  }

  // The text model's settings: text_config in the wrapper, the top level otherwise.
  const nlohmann::json* text = &j;
  std::string tpath = path;
  if (arch->wrapper) {
    if (!top.has("text_config") || !j.at("text_config").is_object())
      top.bad("text_config", "an object holding the text model's settings");
    text = &j.at("text_config");
    tpath = path + ": text_config";
    if (top.has("vision_config")) log_info(path, ": vision-language wrapper ", name, ": serving its text model only (",
                                          "model.visual.* is not loaded)");
  }
  JsonFields t(*text, tpath);
  if (arch->wrapper) {
    if (auto mt = t.opt_string("model_type"); mt && *mt != std::string(arch->moe ? "qwen3_5_moe_text" : "qwen3_5_text"))
      fail(tpath, ": field 'model_type' is '", *mt, "', expected '", arch->moe ? "qwen3_5_moe_text" : "qwen3_5_text", "'");
  }
  if (auto act = t.opt_string("hidden_act"); act && *act != "silu")
    fail(tpath, ": field 'hidden_act' is '", *act, "'; only silu is supported");

  c.vocab_size = req_positive(t, "vocab_size");
  c.hidden_size = req_positive(t, "hidden_size");
  c.num_hidden_layers = req_positive(t, "num_hidden_layers");
  c.num_attention_heads = req_positive(t, "num_attention_heads");
  c.num_key_value_heads = t.has("num_key_value_heads") ? req_positive(t, "num_key_value_heads") : c.num_attention_heads;
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(tpath, ": num_attention_heads (", c.num_attention_heads, ") must be a multiple of num_key_value_heads (",
         c.num_key_value_heads, ")");
  c.head_dim = req_positive(t, "head_dim");  // explicit in every Qwen3.5 config (256 ≠ hidden / heads)
  if (c.head_dim % 2 != 0) fail(tpath, ": head_dim must be even for rotary embeddings, got ", c.head_dim);
  if (t.opt_bool("attention_bias").value_or(false))
    fail(tpath, ": field 'attention_bias' is true; Qwen3.5 attention has no biases (only false is supported)");
  if (auto g = t.opt_bool("attn_output_gate"); g && !*g)
    fail(tpath, ": field 'attn_output_gate' is false; Qwen3.5 attention always gates its output (only true is supported)");
  c.attention_bias = false;
  c.qk_norm = true;

  c.linear_num_key_heads = req_positive(t, "linear_num_key_heads");
  c.linear_num_value_heads = req_positive(t, "linear_num_value_heads");
  c.linear_key_head_dim = req_positive(t, "linear_key_head_dim");
  c.linear_value_head_dim = req_positive(t, "linear_value_head_dim");
  c.linear_conv_kernel_dim = req_positive(t, "linear_conv_kernel_dim");
  if (c.linear_num_value_heads % c.linear_num_key_heads != 0)
    fail(tpath, ": linear_num_value_heads (", c.linear_num_value_heads, ") must be a multiple of linear_num_key_heads (",
         c.linear_num_key_heads, "): value head h reads key head h / (value heads / key heads)");
  if (auto d = t.opt_string("mamba_ssm_dtype"); d && *d != "float32")
    fail(tpath, ": field 'mamba_ssm_dtype' is '", *d, "'; the recurrent state is kept in float32 (only float32 is supported)");
  parse_layer_types(t, c);

  c.rms_norm_eps = t.req_number("rms_norm_eps");
  if (!(c.rms_norm_eps > 0)) fail(tpath, ": field 'rms_norm_eps' must be > 0, got ", c.rms_norm_eps);
  c.max_position_embeddings = req_positive(t, "max_position_embeddings");
  parse_rope(t, c);

  if (arch->moe) {
    parse_moe(t, c, arch->next);
    // The dense MLP's width: needed by Qwen3-Next's dense layers; a Qwen3.5-MoE config has none
    // (transformers: AttributeError), every layer being sparse.
    if (c.has_dense_layers() || t.has("intermediate_size")) c.intermediate_size = req_positive(t, "intermediate_size");
  } else {
    if (t.has("num_experts") && t.req_int("num_experts") != 0)
      fail(tpath, ": field 'num_experts' is set but ", name, " is the dense model (use ",
           arch->wrapper ? "Qwen3_5MoeForConditionalGeneration" : "Qwen3_5MoeForCausalLM", ")");
    c.intermediate_size = req_positive(t, "intermediate_size");
  }

  // tie_word_embeddings: the wrapper writes it at the top level (and may repeat it in text_config).
  std::optional<bool> tie_top = arch->wrapper ? top.opt_bool("tie_word_embeddings") : std::nullopt;
  std::optional<bool> tie_text = t.opt_bool("tie_word_embeddings");
  if (tie_top && tie_text && *tie_top != *tie_text)
    fail(path, ": fields 'tie_word_embeddings' (", *tie_top, ") and 'text_config.tie_word_embeddings' (", *tie_text,
         ") disagree");
  c.tie_word_embeddings = tie_top.value_or(tie_text.value_or(false));

  for (const JsonFields* f : {&t, &top}) {
    for (const char* key : {"torch_dtype", "dtype"}) {
      if (auto s = f->opt_string(key)) {
        if (!dtype_parse(*s, &c.torch_dtype) ||
            (c.torch_dtype != DType::BF16 && c.torch_dtype != DType::F16 && c.torch_dtype != DType::F32))
          fail(f->path(), ": field '", key, "' is '", *s, "' (allowed: bfloat16, float16, float32)");
      }
    }
    if (f == &top && !arch->wrapper) break;
  }
  // Pre-quantized releases (block FP8, AWQ, GPTQ-Int4; model/hybrid_prequant.h). The wrapper
  // writes quantization_config at the top level; a text_config copy is read when the top has none.
  if (top.has("quantization_config") || t.has("quantization_config")) {
    const bool at_top = top.has("quantization_config");
    c.quant = parse_quant_config(at_top ? j.at("quantization_config") : text->at("quantization_config"),
                                 at_top ? path : tpath);
  }
  c.bos_token_ids = id_list(t, "bos_token_id");
  c.eos_token_ids = id_list(t, "eos_token_id");
  if (arch->wrapper) {
    for (int32_t id : id_list(top, "eos_token_id")) {
      bool seen = false;
      for (int32_t e : c.eos_token_ids) seen |= e == id;
      if (!seen) c.eos_token_ids.push_back(id);
    }
  }
  for (int32_t id : c.eos_token_ids)
    if (id >= c.vocab_size) fail(path, ": eos_token_id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")");
  return c;
}

}  // namespace pypto
