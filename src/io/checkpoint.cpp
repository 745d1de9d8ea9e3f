#include "io/checkpoint.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "io/json_fields.h"

namespace pypto {

static bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The embedding checkpoints' flat names → `model.` names. Flat means: embed_tokens.weight is
// present, no tensor starts with "model." and there is no lm_head. A mixture is an Error.
static bool add_model_prefix_to_flat_names(std::unordered_map<std::string, TensorRef>& tensors, const std::string& dir) {
  if (!tensors.contains("embed_tokens.weight")) return false;
  for (const auto& [name, ref] : tensors)
    if (name.starts_with("model.") || name.starts_with("lm_head."))
      fail(dir, ": tensor names mix the flat layout (embed_tokens.weight) with '", name,
           "': expected either model.* names or flat embedding-model names without lm_head");
  std::unordered_map<std::string, TensorRef> renamed;
  for (auto& [name, ref] : tensors) renamed.emplace("model." + name, ref);
  tensors = std::move(renamed);
  return true;
}

bool Checkpoint::has_file(const std::string& file) const { return file_exists(path(file)); }

namespace {

// vLLM's rule for a nested config: an object given for a sub-config (the vision-language
// wrapper's text_config / vision_config) updates it key by key, objects inside it merged the same
// way (so {"text_config": {"rope_parameters": {"rope_type": "yarn", ...}}} keeps rope_theta and
// partial_rotary_factor); every other top-level key is replaced whole.
void merge_nested(nlohmann::json& target, const nlohmann::json& update) {
  for (const auto& [key, value] : update.items()) {
    if (value.is_object() && target.contains(key) && target[key].is_object()) merge_nested(target[key], value);
    else target[key] = value;
  }
}

void apply_hf_overrides(nlohmann::json& cfg, const nlohmann::json& over) {
  const bool wrapper = cfg.contains("text_config") && cfg["text_config"].is_object();
  for (const auto& [key, value] : over.items()) {
    // The wrapper's text model reads its settings from text_config only: a top-level one would be
    // ignored, so it is refused with the form that takes effect.
    if (wrapper && (key == "rope_scaling" || key == "rope_parameters" || key == "max_position_embeddings"))
      fail("--hf-overrides: '", key, "' at the top level is not read for this vision-language wrapper (its text ",
           "model's settings are under text_config); give it as {\"text_config\": {\"", key == "rope_scaling" ? "rope_parameters" : key,
           "\": ...}}");
    if ((key == "text_config" || key == "vision_config") && value.is_object() && cfg.contains(key) &&
        cfg[key].is_object())
      merge_nested(cfg[key], value);
    else
      cfg[key] = value;  // top-level keys replaced whole
  }
}

}  // namespace

ModelConfig read_model_config(const std::string& dir, const std::string& hf_overrides) {
  const std::string cfg_path = dir + "/config.json";
  if (!file_exists(cfg_path)) fail(cfg_path, ": missing (a checkpoint directory needs config.json)");
  if (hf_overrides.empty()) return parse_model_config(read_text_file(cfg_path), cfg_path);
  nlohmann::json cfg = parse_json_object(read_text_file(cfg_path), cfg_path);
  const nlohmann::json over = parse_json_object(hf_overrides, "--hf-overrides");
  apply_hf_overrides(cfg, over);
  return parse_model_config(cfg.dump(), cfg_path + " with --hf-overrides");
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& dir_in, const std::string& hf_overrides) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) fail(dir, ": not a checkpoint directory (does not exist)");
  auto ck = std::unique_ptr<Checkpoint>(new Checkpoint());
  ck->dir_ = dir;

  ck->config_ = read_model_config(dir, hf_overrides);
  std::string gen_path = dir + "/generation_config.json";
  if (file_exists(gen_path)) merge_generation_config(ck->config_, read_text_file(gen_path), gen_path);

  // Weights: the index (shards) wins over a single file.
  std::string index_path = dir + "/model.safetensors.index.json";
  std::map<std::string, std::vector<std::string>> names_by_file;  // from the index
  std::vector<std::string> shard_files;
  if (file_exists(index_path)) {
    nlohmann::json idx = parse_json_object(read_text_file(index_path), index_path);
    if (!idx.contains("weight_map") || !idx["weight_map"].is_object())
      fail(index_path, ": missing object field 'weight_map'");
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
      if (!it->is_string()) fail(index_path, ": weight_map entry '", it.key(), "' must be a file name string");
      std::string f = it->get<std::string>();
      if (f.find('/') != std::string::npos || f == ".." || f.empty())
        fail(index_path, ": weight_map entry '", it.key(), "' names '", f, "', which is not a file in the directory");
      names_by_file[f].push_back(it.key());
    }
    for (auto& [f, _] : names_by_file) shard_files.push_back(f);
  } else if (file_exists(dir + "/model.safetensors")) {
    shard_files.push_back("model.safetensors");
  } else {
    fail(dir, ": no weights (expected model.safetensors or model.safetensors.index.json)");
  }

  for (const std::string& f : shard_files) {
    std::string p = dir + "/" + f;
    if (!file_exists(p)) fail(index_path, ": shard '", f, "' listed in weight_map does not exist");
    ck->files_.push_back(SafetensorsFile::open(p));
    const SafetensorsFile* sf = ck->files_.back().get();
    if (!names_by_file.empty()) {
      // Only the tensors the index assigns to this shard; each must be present.
      for (const std::string& name : names_by_file[f]) {
        const SafetensorInfo* info = sf->find(name);
        if (!info) fail(p, ": tensor '", name, "' is listed for this shard in model.safetensors.index.json but absent");
        ck->tensors_[name] = TensorRef{sf, info};
      }
    } else {
      for (const auto& info : sf->tensors()) ck->tensors_[info.name] = TensorRef{sf, &info};
    }
  }
  ck->headless_ = add_model_prefix_to_flat_names(ck->tensors_, dir);
  if (ck->headless_) ck->config_.tie_word_embeddings = true;  // see headless()
  return ck;
}

const TensorRef* Checkpoint::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

const TensorRef& Checkpoint::get(const std::string& name) const {
  const TensorRef* r = find(name);
  if (!r) fail(dir_, ": tensor '", name, "' not found in the checkpoint");
  return *r;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> v;
  for (const auto& [k, _] : tensors_) v.push_back(k);
  std::sort(v.begin(), v.end());
  return v;
}

size_t Checkpoint::total_tensor_bytes() const {
  size_t n = 0;
  for (const auto& [_, r] : tensors_) n += r.info->end - r.info->begin;
  return n;
}

}  // namespace pypto
