#pragma once
// The model hyper-parameters read from a checkpoint's config.json (Qwen3ForCausalLM and
// Qwen2ForCausalLM) plus generation_config.json's eos ids when present.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/quant_config.h"
#include "io/rope_scaling.h"

namespace pypto {

enum class ModelArch { Qwen3, Qwen2 };

struct ModelConfig {
  ModelArch arch = ModelArch::Qwen3;
  std::string architecture;  // as written in config.json, e.g. "Qwen3ForCausalLM"
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int32_t num_hidden_layers = 0;
  int32_t num_attention_heads = 0;
  int32_t num_key_value_heads = 0;
  int32_t head_dim = 0;  // from config.json; hidden_size / num_attention_heads only when absent
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;  // plain RoPE unless config.json asks for YaRN
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v biases (Qwen2 checkpoints have them)
  bool qk_norm = true;          // per-head RMSNorm on q and k (Qwen3); Qwen2 has none
  DType torch_dtype = DType::BF16;
  std::vector<int32_t> bos_token_ids;  // may be empty
  std::vector<int32_t> eos_token_ids;  // config.json eos_token_id ∪ generation_config.json's
  QuantConfig quant;                   // quantization_config (method None when absent or null)

  int64_t q_size() const { return int64_t(num_attention_heads) * head_dim; }   // q rows
  int64_t kv_size() const { return int64_t(num_key_value_heads) * head_dim; }  // k (or v) rows
};

// Parses config.json text (`path` is used in messages). Throws Error naming the field and the
// file when a field is missing or ill-typed, or names an unsupported architecture/rope_scaling or
// quantization_config (io/quant_config.h).
ModelConfig parse_model_config(const std::string& json_text, const std::string& path);
// Reads generation_config.json text and merges its eos_token_id(s) into cfg.
void merge_generation_config(ModelConfig& cfg, const std::string& json_text, const std::string& path);

}  // namespace pypto
