#include "io/pooling_config.h"

#include <filesystem>

#include "core/error.h"
#include "io/model_config.h"

namespace pypto {

namespace fs = std::filesystem;

const char* const kQwen3RerankerOverrides =
    R"({"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token": ["no", "yes"], )"
    R"("is_original_qwen3_reranker": true})";

const char* pooling_task_name(PoolingTask t) {
  switch (t) {
    case PoolingTask::None: return "generate";
    case PoolingTask::Embed: return "embed";
    case PoolingTask::Score: return "score";
  }
  return "?";
}

Runner parse_runner(const std::string& s) {
  if (s == "auto") return Runner::Auto;
  if (s == "generate") return Runner::Generate;
  if (s == "pooling") return Runner::Pooling;
  if (s == "rerank") return Runner::Rerank;
  fail("--runner '", s, "' is not one of auto, generate, pooling, rerank");
}

const char* runner_name(Runner r) {
  switch (r) {
    case Runner::Auto: return "auto";
    case Runner::Generate: return "generate";
    case Runner::Pooling: return "pooling";
    case Runner::Rerank: return "rerank";
  }
  return "?";
}

std::string hf_overrides_for_runner(Runner r, const std::string& hf_overrides) {
  if (r != Runner::Rerank) return hf_overrides;
  nlohmann::json over = hf_overrides.empty() ? nlohmann::json::object() : parse_json_object(hf_overrides, "--hf-overrides");
  const nlohmann::json rerank = nlohmann::json::parse(kQwen3RerankerOverrides);
  for (const auto& [key, value] : rerank.items()) {
    if (over.contains(key) && over[key] != value)
      fail("--runner rerank sets --hf-overrides key '", key, "' to ", value.dump(), " but --hf-overrides gives ",
           over[key].dump());
    over[key] = value;
  }
  return over.dump();
}

void parse_sequence_classification(const JsonFields& f, ModelConfig& c) {
  const std::string& path = f.path();
  // vLLM reads the original Qwen3-Reranker (a causal LM) as a one-logit classifier when told so;
  // a converted seq-cls checkpoint carries a `score.weight` head instead, which we do not load.
  if (f.opt_bool("is_original_qwen3_reranker").value_or(false) == false && !f.opt_bool("is_qwen3_rerank").value_or(false))
    fail(path, ": architecture Qwen3ForSequenceClassification is served only for the original Qwen3-Reranker "
               "checkpoints: add \"is_original_qwen3_reranker\": true and \"classifier_from_token\": [\"no\", \"yes\"] "
               "(or use --runner rerank); converted seq-cls checkpoints with a score head are not supported");
  if (!f.has("classifier_from_token")) f.bad("classifier_from_token", "a list of two token strings, e.g. [\"no\", \"yes\"]");
  const auto& list = f.at("classifier_from_token");
  if (!list.is_array() || list.size() != 2 || !list[0].is_string() || !list[1].is_string())
    f.bad("classifier_from_token", "a list of two token strings, e.g. [\"no\", \"yes\"]");
  c.pooling.task = PoolingTask::Score;
  c.pooling.classifier_from_token = {list[0].get<std::string>(), list[1].get<std::string>()};
}

namespace {

bool is_file(const fs::path& p) { return fs::is_regular_file(p); }

// modules.json: a list of {"type": "sentence_transformers.models.X", "path": ...}. Returns
// whether a Normalize module is listed; a module we do not run (Dense, ...) is an Error.
bool read_modules(const fs::path& p) {
  const nlohmann::json j = nlohmann::json::parse(read_text_file(p.string()), nullptr, false);
  if (!j.is_array()) fail(p.string(), ": expected a list of modules");
  bool normalize = false;
  for (const auto& m : j) {
    const std::string type = m.is_object() && m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
    if (type.ends_with(".Transformer") || type.ends_with(".Pooling")) continue;
    if (type.ends_with(".Normalize")) {
      normalize = true;
      continue;
    }
    fail(p.string(), ": module type '", type, "' is not supported (supported: Transformer, Pooling, Normalize)");
  }
  return normalize;
}

// 1_Pooling/config.json: only last-token pooling is implemented (what Qwen3-Embedding uses).
void check_pooling_mode(const fs::path& p) {
  const nlohmann::json j = parse_json_object(read_text_file(p.string()), p.string());
  JsonFields f(j, p.string());
  if (f.opt_bool("pooling_mode_lasttoken").value_or(false)) return;
  std::string modes;
  for (const auto& [k, v] : j.items())
    if (k.starts_with("pooling_mode_") && v.is_boolean() && v.get<bool>()) modes += (modes.empty() ? "" : ", ") + k;
  fail(p.string(), ": pooling ", modes.empty() ? std::string("(none set)") : modes,
       " is not supported; only pooling_mode_lasttoken (last-token pooling) is");
}

std::map<std::string, std::string> read_prompts(const fs::path& p) {
  const nlohmann::json j = parse_json_object(read_text_file(p.string()), p.string());
  std::map<std::string, std::string> out;
  if (!j.contains("prompts") || j["prompts"].is_null()) return out;
  if (!j["prompts"].is_object()) fail(p.string(), ": field 'prompts' must be an object of name -> text");
  for (const auto& [k, v] : j["prompts"].items()) {
    if (!v.is_string()) fail(p.string(), ": prompt '", k, "' must be a string");
    out[k] = v.get<std::string>();
  }
  return out;
}

}  // namespace

PoolingConfig resolve_pooling(const std::string& dir, const ModelConfig& c, bool headless, Runner r) {
  const fs::path d(dir);
  const bool st_files = is_file(d / "modules.json") || is_file(d / "1_Pooling/config.json");
  const bool score = c.pooling.task == PoolingTask::Score;
  if (r == Runner::Generate) {
    if (headless)
      fail(dir, ": this checkpoint has no lm_head (flat tensor names: an embedding model such as Qwen3-Embedding); "
                "it cannot generate: use --runner pooling (or auto)");
    if (score)
      fail(dir, ": --runner generate with a Qwen3ForSequenceClassification config (--hf-overrides): the reranker "
                "overrides need --runner pooling (or auto)");
    return {};
  }
  if (r == Runner::Auto && !headless && !st_files && !score) return {};  // a plain causal LM generates
  PoolingConfig p = c.pooling;
  if (score) {
    if (headless) fail(dir, ": --runner rerank (or the reranker overrides) on a checkpoint without lm_head: the score needs "
                            "its yes/no rows");
    return p;
  }
  if (r == Runner::Rerank) fail(dir, ": --runner rerank did not set up the reranker");  // overrides merged first
  p.task = PoolingTask::Embed;
  p.normalize = true;  // vLLM's default for embedding models without sentence-transformers files
  if (is_file(d / "modules.json")) p.normalize = read_modules(d / "modules.json");
  if (is_file(d / "1_Pooling/config.json")) check_pooling_mode(d / "1_Pooling/config.json");
  if (is_file(d / "config_sentence_transformers.json")) p.prompts = read_prompts(d / "config_sentence_transformers.json");
  return p;
}

}  // namespace pypto
