#include "engine/speculative_config.h"

#include <filesystem>
#include <set>

#include "core/error.h"
#include "engine/mtp_config.h"
#include "model/eagle3_config.h"
#include "io/json_fields.h"
#include "io/model_config.h"

namespace pypto {

namespace {

constexpr const char* kWhere = "--speculative-config";
constexpr const char* kAllowedKeys =
    "method, num_speculative_tokens, cost_model, prompt_lookup_max, prompt_lookup_min (ngram), model, quantization "
    "(draft_model)";
// (method mtp takes method and num_speculative_tokens only; eagle3 also model)

int32_t positive_int(const JsonFields& f, const char* key, int64_t max) {
  const int64_t v = f.req_int(key);
  if (v < 1 || v > max) fail(kWhere, ": '", key, "' must be an integer in [1, ", max, "], got ", v);
  return int32_t(v);
}

// The first difference between two tokenizer.json files that changes token ids, or "" when
// they agree on the vocabulary, the merges and the added tokens.
std::string tokenizer_difference(const std::string& target_dir, const std::string& draft_dir) {
  const std::string tp = target_dir + "/tokenizer.json", dp = draft_dir + "/tokenizer.json";
  const nlohmann::json t = parse_json_object(read_text_file(tp), tp);
  const nlohmann::json d = parse_json_object(read_text_file(dp), dp);
  const nlohmann::json empty = nlohmann::json::object();
  const nlohmann::json& tv = t.contains("model") ? t["model"].value("vocab", empty) : empty;
  const nlohmann::json& dv = d.contains("model") ? d["model"].value("vocab", empty) : empty;
  if (tv.size() != dv.size())
    return str_cat("the target's tokenizer has ", tv.size(), " vocabulary entries, the draft's ", dv.size());
  for (auto it = tv.begin(); it != tv.end(); ++it) {
    auto o = dv.find(it.key());
    if (o == dv.end()) return str_cat("token ", nlohmann::json(it.key()).dump(), " is missing from the draft's tokenizer");
    if (*o != *it)
      return str_cat("token ", nlohmann::json(it.key()).dump(), " has id ", it->dump(), " in the target's tokenizer and ",
                     o->dump(), " in the draft's");
  }
  const nlohmann::json& tm = t.contains("model") ? t["model"].value("merges", nlohmann::json::array()) : empty;
  const nlohmann::json& dm = d.contains("model") ? d["model"].value("merges", nlohmann::json::array()) : empty;
  if (tm != dm) return "the tokenizers' BPE merges differ";
  if (t.value("added_tokens", nlohmann::json::array()) != d.value("added_tokens", nlohmann::json::array()))
    return "the tokenizers' added (special) tokens differ";
  return "";
}

}  // namespace

const char* speculative_method_name(SpeculativeMethod m) {
  switch (m) {
    case SpeculativeMethod::None: return "none";
    case SpeculativeMethod::Ngram: return "ngram";
    case SpeculativeMethod::DraftModel: return "draft_model";
    case SpeculativeMethod::Mtp: return "mtp";
    case SpeculativeMethod::Eagle3: return "eagle3";
  }
  return "none";
}

void SpeculativeConfig::validate() const {
  if (!enabled()) return;
  if (num_speculative_tokens < 1 || num_speculative_tokens > kMaxSpeculativeTokens)
    fail(kWhere, ": 'num_speculative_tokens' must be in [1, ", kMaxSpeculativeTokens, "], got ", num_speculative_tokens);
  if (method == SpeculativeMethod::Ngram) {
    if (prompt_lookup_min < 1) fail(kWhere, ": 'prompt_lookup_min' must be >= 1, got ", prompt_lookup_min);
    if (prompt_lookup_max < prompt_lookup_min)
      fail(kWhere, ": 'prompt_lookup_max' (", prompt_lookup_max, ") must be >= 'prompt_lookup_min' (",
           prompt_lookup_min, ")");
  }
  if (method == SpeculativeMethod::DraftModel) {
    if (draft_model.empty()) fail(kWhere, ": method draft_model needs 'model' (the draft's checkpoint directory)");
    if (draft_quantization != "none" && draft_quantization != "int8" && draft_quantization != "int4")
      fail(kWhere, ": 'quantization' must be one of none, int8, int4, got \"", draft_quantization, "\"");
  }
  if (method == SpeculativeMethod::Eagle3 && draft_model.empty())
    fail(kWhere, ": method eagle3 needs 'model' (the EAGLE-3 head's directory)");
}

SpeculativeConfig parse_speculative_config(const std::string& json_text) {
  SpeculativeConfig c;
  if (json_text.empty()) return c;
  const nlohmann::json obj = parse_json_object(json_text, kWhere);
  static const std::set<std::string> known = {"method",           "num_speculative_tokens", "prompt_lookup_max",
                                              "prompt_lookup_min", "model",                  "quantization",
                                              "cost_model"};
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!known.contains(it.key())) fail(kWhere, ": unknown key '", it.key(), "'; allowed keys: ", kAllowedKeys);
  const JsonFields f(obj, kWhere);

  // vLLM infers the method from `model` when it is left out (an EAGLE-3 head by its config.json's
  // architecture); without a model it is required.
  std::string method = f.opt_string("method").value_or("");
  if (method.empty() && f.has("model")) {
    const std::string dir = f.opt_string("model").value_or("");
    method = dir_holds_eagle3_head(dir) ? "eagle3" : "draft_model";
  }
  if (method.empty()) fail(kWhere, ": 'method' is required without 'model'; allowed methods: ngram, draft_model, mtp, eagle3");
  if (method == "ngram") {
    c.method = SpeculativeMethod::Ngram;
  } else if (method == "draft_model") {
    c.method = SpeculativeMethod::DraftModel;
  } else if (is_mtp_method(method)) {
    c.method = SpeculativeMethod::Mtp;  // engine/mtp_config.h
  } else if (method == "eagle3") {
    c.method = SpeculativeMethod::Eagle3;  // model/eagle3_head.h
  } else {
    fail(kWhere, ": method \"", method, "\" is not supported; allowed methods: ngram, draft_model, mtp, eagle3 (EAGLE-1 ",
         "(eagle), Medusa and suffix decoding are not built)");
  }
  c.num_speculative_tokens = positive_int(f, "num_speculative_tokens", kMaxSpeculativeTokens);
  c.cost_model = f.opt_bool("cost_model").value_or(true);
  if (c.method == SpeculativeMethod::Mtp) {
    for (const char* key : {"model", "quantization", "prompt_lookup_min", "prompt_lookup_max"})
      if (f.has(key)) fail(kWhere, ": '", key, "' does not apply to method mtp (the MTP head is the target checkpoint's own)");
    c.validate();
    return c;
  }
  if (c.method == SpeculativeMethod::Eagle3) {
    for (const char* key : {"quantization", "prompt_lookup_min", "prompt_lookup_max"})
      if (f.has(key)) fail(kWhere, ": '", key, "' does not apply to method eagle3 (the head runs in its own dtype)");
    c.draft_model = f.opt_string("model").value_or("");
    c.validate();
    return c;
  }

  if (c.method == SpeculativeMethod::Ngram) {
    for (const char* key : {"model", "quantization"})
      if (f.has(key)) fail(kWhere, ": '", key, "' is for method draft_model, not ngram");
    const bool has_min = f.has("prompt_lookup_min"), has_max = f.has("prompt_lookup_max");
    // Large windows only cost scanning time: a match longer than the context can never happen.
    constexpr int64_t kMaxWindow = 1024;
    c.prompt_lookup_min = has_min ? positive_int(f, "prompt_lookup_min", kMaxWindow) : 0;
    c.prompt_lookup_max = has_max ? positive_int(f, "prompt_lookup_max", kMaxWindow) : 0;
    if (!has_min && !has_max) c.prompt_lookup_min = c.prompt_lookup_max = 5;
    if (!has_min && has_max) c.prompt_lookup_min = c.prompt_lookup_max;
    if (has_min && !has_max) c.prompt_lookup_max = c.prompt_lookup_min;
  } else {
    for (const char* key : {"prompt_lookup_min", "prompt_lookup_max"})
      if (f.has(key)) fail(kWhere, ": '", key, "' is for method ngram, not draft_model");
    c.draft_model = f.opt_string("model").value_or("");
    c.draft_quantization = f.opt_string("quantization").value_or("none");
  }
  c.validate();
  return c;
}

void check_speculative_target(const SpeculativeConfig& spec, const ModelConfig& target, const std::string& target_dir) {
  if (!spec.enabled()) return;
  if (target.pooling.pooling())
    fail(kWhere, ": a pooling model (--runner pooling: embeddings, scores) generates no tokens to speculate on: "
         "leave --speculative-config out");
  if (spec.method == SpeculativeMethod::Mtp) check_mtp_target(spec, target, target_dir);
  if (spec.method == SpeculativeMethod::Eagle3) {
    check_eagle3_target(read_eagle3_config(spec.draft_model), target);
    if (std::filesystem::exists(spec.draft_model + "/tokenizer.json"))  // heads usually ship none
      if (const std::string diff = tokenizer_difference(target_dir, spec.draft_model); !diff.empty())
        fail(kWhere, ": the EAGLE-3 head ", spec.draft_model, " does not share the target's tokenizer: ", diff);
    return;
  }
  if (spec.method != SpeculativeMethod::DraftModel) return;
  namespace fs = std::filesystem;
  const std::string cfg_path = spec.draft_model + "/config.json";
  if (!fs::exists(cfg_path)) fail(kWhere, ": draft 'model' ", spec.draft_model, " has no config.json");
  const ModelConfig draft = parse_model_config(read_text_file(cfg_path), cfg_path);
  if (draft.hybrid()) fail(kWhere, ": the draft ", spec.draft_model, " is a hybrid (Gated DeltaNet) model; drafts must be dense Qwen3");
  if (draft.vocab_size != target.vocab_size)
    fail(kWhere, ": the draft ", spec.draft_model, " has vocab_size ", draft.vocab_size, ", the target has ",
         target.vocab_size, ": a draft must share the target's vocabulary");
  if (const std::string diff = tokenizer_difference(target_dir, spec.draft_model); !diff.empty())
    fail(kWhere, ": the draft ", spec.draft_model, " does not share the target's tokenizer: ", diff);
}

}  // namespace pypto
