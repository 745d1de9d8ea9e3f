#include "model/eagle3_config.h"

#include <filesystem>

#include "core/error.h"
#include "io/json_fields.h"
#include "io/model_config.h"

namespace pypto {

namespace {

constexpr const char* kArchitectures[] = {"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM"};

int32_t positive_i32(const JsonFields& f, const char* key, std::optional<int64_t> v) {
  if (!v) f.bad(key, "a positive integer");
  if (*v < 1 || *v > (int64_t(1) << 30)) fail(f.path(), ": field '", key, "' must be a positive integer, got ", *v);
  return int32_t(*v);
}

}  // namespace

bool is_eagle3_architecture(const std::string& arch) {
  for (const char* a : kArchitectures)
    if (arch == a) return true;
  return false;
}

bool dir_holds_eagle3_head(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::exists(path)) return false;
  const nlohmann::json cfg = parse_json_object(read_text_file(path), path);
  const auto it = cfg.find("architectures");
  if (it == cfg.end() || !it->is_array()) return false;
  for (const auto& a : *it)
    if (a.is_string() && is_eagle3_architecture(a.get<std::string>())) return true;
  return false;
}

Eagle3Config read_eagle3_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!std::filesystem::exists(path)) fail("EAGLE-3 head ", dir, " has no config.json");
  const nlohmann::json cfg = parse_json_object(read_text_file(path), path);
  const JsonFields f(cfg, path);
  Eagle3Config c;
  c.dir = dir;
  const auto arch = cfg.find("architectures");
  if (arch != cfg.end() && arch->is_array())
    for (const auto& a : *arch)
      if (a.is_string() && is_eagle3_architecture(a.get<std::string>())) c.architecture = a.get<std::string>();
  if (c.architecture.empty())
    fail(path, ": field 'architectures' must name an EAGLE-3 head (LlamaForCausalLMEagle3 or Eagle3LlamaForCausalLM), got ",
         arch == cfg.end() ? std::string("nothing") : arch->dump());
  if (const int64_t layers = f.opt_int("num_hidden_layers").value_or(1); layers != 1)
    fail(path, ": field 'num_hidden_layers' is ", layers, "; only 1 (one decoder layer, as EAGLE-3 heads are published) ",
         "is supported");
  c.hidden_size = positive_i32(f, "hidden_size", f.opt_int("hidden_size"));
  c.target_hidden_size = positive_i32(f, "target_hidden_size", f.opt_int("target_hidden_size").value_or(c.hidden_size));
  c.intermediate_size = positive_i32(f, "intermediate_size", f.opt_int("intermediate_size"));
  c.num_attention_heads = positive_i32(f, "num_attention_heads", f.opt_int("num_attention_heads"));
  c.num_key_value_heads =
      positive_i32(f, "num_key_value_heads", f.opt_int("num_key_value_heads").value_or(c.num_attention_heads));
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    fail(path, ": field 'num_key_value_heads' (", c.num_key_value_heads, ") must divide 'num_attention_heads' (",
         c.num_attention_heads, ")");
  if (!f.has("head_dim") && c.hidden_size % c.num_attention_heads != 0)
    fail(path, ": field 'head_dim' is absent and 'hidden_size' (", c.hidden_size, ") is not a multiple of ",
         "'num_attention_heads' (", c.num_attention_heads, ")");
  c.head_dim = positive_i32(f, "head_dim", f.opt_int("head_dim").value_or(c.hidden_size / c.num_attention_heads));
  if (c.head_dim % 2 != 0) fail(path, ": field 'head_dim' must be even (RoPE rotates pairs), got ", c.head_dim);
  c.vocab_size = positive_i32(f, "vocab_size", f.opt_int("vocab_size"));
  c.draft_vocab_size = positive_i32(f, "draft_vocab_size", f.opt_int("draft_vocab_size").value_or(c.vocab_size));
  if (c.draft_vocab_size > c.vocab_size)
    fail(path, ": field 'draft_vocab_size' (", c.draft_vocab_size, ") exceeds 'vocab_size' (", c.vocab_size, ")");
  c.rms_norm_eps = f.opt_number("rms_norm_eps").value_or(1e-6);
  if (!(c.rms_norm_eps > 0)) fail(path, ": field 'rms_norm_eps' must be positive, got ", c.rms_norm_eps);
  c.rope_theta = f.opt_number("rope_theta").value_or(10000.0);
  if (!(c.rope_theta > 1)) fail(path, ": field 'rope_theta' must be > 1, got ", c.rope_theta);
  if (f.has("rope_scaling"))
    fail(path, ": field 'rope_scaling' is set (", cfg["rope_scaling"].dump(), "); an EAGLE-3 head with scaled RoPE is ",
         "not supported (plain rope_theta only)");
  if (const std::string act = f.opt_string("hidden_act").value_or("silu"); act != "silu")
    fail(path, ": field 'hidden_act' is \"", act, "\"; only silu (Llama's MLP) is supported");
  for (const char* key : {"attention_bias", "mlp_bias", "qkv_bias", "bias"})
    if (f.opt_bool(key).value_or(false)) fail(path, ": field '", key, "' is true; EAGLE-3 heads with biases are not supported");
  c.norm_before_residual = f.opt_bool("norm_before_residual").value_or(false);
  const nlohmann::json* ids = nullptr;
  if (cfg.contains("eagle_aux_hidden_state_layer_ids") && !cfg["eagle_aux_hidden_state_layer_ids"].is_null())
    ids = &cfg["eagle_aux_hidden_state_layer_ids"];
  if (cfg.contains("eagle_config") && cfg["eagle_config"].is_object()) {
    const nlohmann::json& e = cfg["eagle_config"];
    if (!ids && e.contains("eagle_aux_hidden_state_layer_ids") && !e["eagle_aux_hidden_state_layer_ids"].is_null())
      ids = &e["eagle_aux_hidden_state_layer_ids"];
    if (e.contains("use_aux_hidden_state") && !(e["use_aux_hidden_state"].is_boolean() && e["use_aux_hidden_state"].get<bool>()))
      fail(path, ": field 'eagle_config.use_aux_hidden_state' is ", e["use_aux_hidden_state"].dump(),
           "; only heads fusing the target's auxiliary hidden states (true, EAGLE-3) are supported");
  }
  if (ids) {
    if (!ids->is_array()) fail(path, ": field 'eagle_aux_hidden_state_layer_ids' must be a list of layer indices");
    for (const auto& v : *ids) {
      if (!v.is_number_integer())
        fail(path, ": field 'eagle_aux_hidden_state_layer_ids' must hold integers, got ", v.dump());
      c.aux_layer_ids.push_back(int32_t(std::clamp<int64_t>(v.get<int64_t>(), -1, int64_t(1) << 30)));
    }
    if (c.aux_layer_ids.size() != 3)
      fail(path, ": field 'eagle_aux_hidden_state_layer_ids' must list 3 target layers (fc fuses 3 states), got ",
           c.aux_layer_ids.size());
  }
  return c;
}

std::vector<int32_t> eagle3_aux_layers(const Eagle3Config& c, const ModelConfig& target) {
  const int32_t n = target.num_hidden_layers;
  const bool given = !c.aux_layer_ids.empty();
  const std::vector<int32_t> ids = given ? c.aux_layer_ids : std::vector<int32_t>{2, n / 2, n - 3};
  for (const int32_t i : ids)
    if (i < 0 || i >= n)
      fail(c.dir, "/config.json: ",
           given ? "field 'eagle_aux_hidden_state_layer_ids'" : "the default auxiliary layers (2, N/2, N-3)", " (",
           ids[0], ", ", ids[1], ", ", ids[2], ") name target layer ", i, ", outside the target's ", n,
           " layers [0, ", n, ")", given ? "" : "; set eagle_aux_hidden_state_layer_ids");
  return ids;
}

void check_eagle3_target(const Eagle3Config& c, const ModelConfig& target) {
  const std::string path = c.dir + "/config.json";
  if (target.arch != ModelArch::Qwen3 && target.arch != ModelArch::Qwen2 && target.arch != ModelArch::Qwen3Moe)
    fail("--speculative-config: method eagle3 drafts for Qwen3, Qwen3-MoE (or Qwen2) targets; ", target.architecture,
         " is not one (use method ngram or draft_model", target.hybrid() ? ", or mtp" : "", ")");
  if (c.hidden_size != target.hidden_size)
    fail(path, ": field 'hidden_size' is ", c.hidden_size, ", the target's hidden_size is ", target.hidden_size,
         " (the head's output feeds back as its next hidden state and its embedding may be the target's)");
  if (c.target_hidden_size != target.hidden_size)
    fail(path, ": field 'target_hidden_size' is ", c.target_hidden_size, ", the target's hidden_size is ",
         target.hidden_size);
  if (c.vocab_size != target.vocab_size)
    fail(path, ": field 'vocab_size' is ", c.vocab_size, ", the target's vocab_size is ", target.vocab_size,
         ": an EAGLE-3 head drafts target token ids");
  (void)eagle3_aux_layers(c, target);
}

}  // namespace pypto
