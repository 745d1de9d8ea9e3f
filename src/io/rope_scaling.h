#pragma once
// config.json's rope_scaling (transformers v4) or rope_parameters (v5) and the positions a model
// takes. Plain RoPE ("default", or null) and YaRN ("yarn") are implemented; linear, dynamic,
// llama3, longrope and anything else are refused by name. The YaRN formulas are in
// kernels/rope_spec.h; this file only reads and checks the fields.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace pypto {

struct RopeScaling {
  bool yarn = false;  // false: plain RoPE
  double factor = 1;  // YaRN: the context extension factor (>= 1)
  // YaRN: the pre-YaRN context length (rope_scaling.original_max_position_embeddings, else the
  // config's max_position_embeddings, as transformers assumes).
  int64_t original_max_position_embeddings = 0;
  double beta_fast = 32, beta_slow = 1;
  bool truncate = true;
  // cos / sin multiplier: rope_scaling.attention_factor, else from mscale / mscale_all_dim, else
  // 0.1 · ln(factor) + 1 (1 for factor <= 1).
  double attention_factor = 1;
};

// `rs` is the rope_scaling / rope_parameters object; errors name `path` and the field.
RopeScaling parse_rope_scaling(const nlohmann::json& rs, int64_t max_position_embeddings, const std::string& path);

// The positions a model takes: max_position_embeddings, or for YaRN the larger of it and
// factor × original_max_position_embeddings (vLLM's derived limit; Qwen3 with factor 4 over 32,768:
// 131,072).
struct ModelConfig;
int64_t model_max_positions(const ModelConfig& c);
// Error when max_model_len passes model_max_positions(c), naming the limit and how to raise it.
void check_max_model_len(const ModelConfig& c, int64_t max_model_len);

}  // namespace pypto
