#pragma once
// A Hugging Face checkpoint directory: config.json (+ generation_config.json), tokenizer files,
// and weights as one model.safetensors or shards listed in model.safetensors.index.json.
// Opening validates every shard's header; tensor data is read lazily through mmap.
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/model_config.h"
#include "io/safetensors.h"

namespace pypto {

struct TensorRef {
  const SafetensorsFile* file = nullptr;
  const SafetensorInfo* info = nullptr;
  const uint8_t* data() const { return file->data(*info); }
};

// DIR/config.json with --hf-overrides' top-level keys replacing its own (as Checkpoint::open reads
// it, without opening the weights). Throws Error naming the file or field.
ModelConfig read_model_config(const std::string& dir, const std::string& hf_overrides = "");

class Checkpoint {
 public:
  // Throws Error naming the missing/invalid file, field or tensor.
  // hf_overrides: a JSON object (vLLM's --hf-overrides) whose top-level keys replace config.json's
  // before it is read, e.g. {"rope_scaling": {...}, "max_position_embeddings": N}; "" for none.
  static std::unique_ptr<Checkpoint> open(const std::string& dir, const std::string& hf_overrides = "");

  const std::string& dir() const { return dir_; }
  const ModelConfig& config() const { return config_; }
  std::string path(const std::string& file) const { return dir_ + "/" + file; }
  bool has_file(const std::string& file) const;

  // The tensor named `name`, or nullptr.
  const TensorRef* find(const std::string& name) const;
  // The tensor or an Error "<dir>: tensor '<name>' not found in <files>".
  const TensorRef& get(const std::string& name) const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }
  std::vector<std::string> tensor_names() const;  // sorted
  size_t total_tensor_bytes() const;
  // Qwen3-Embedding's published layout: flat tensor names (embed_tokens.*, layers.N.*, norm.*,
  // no `model.` prefix) and no lm_head. open() gives such tensors their `model.` names, so the
  // rest of the loader sees one layout, and reads the table as tied (it is the only copy; even
  // the 8B, whose config says tie_word_embeddings false, ships no lm_head).
  bool headless() const { return headless_; }

 private:
  std::string dir_;
  ModelConfig config_;
  bool headless_ = false;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, TensorRef> tensors_;
};

}  // namespace pypto
