#pragma once
// An EAGLE-3 draft head's config.json (fact sheet speculative.md §4.3): one Llama-style decoder
// layer whose attention reads 2·hidden inputs, an `fc` fusing three of the target's residual-stream
// states, its own final norm and lm_head over a draft vocabulary mapped into the target's by d2t.
// Published for Qwen3 targets as "LlamaForCausalLMEagle3" / "Eagle3LlamaForCausalLM",
// model_type llama.
#include <cstdint>
#include <string>
#include <vector>

namespace pypto {

struct ModelConfig;

struct Eagle3Config {
  std::string dir;           // the head's directory
  std::string architecture;  // one of kEagle3Architectures
  int64_t hidden_size = 0;
  int64_t target_hidden_size = 0;  // the fused states' width (default hidden_size)
  int64_t intermediate_size = 0;
  int32_t num_attention_heads = 0, num_key_value_heads = 0, head_dim = 0;
  int64_t vocab_size = 0;        // the target's vocabulary, which d2t maps into
  int64_t draft_vocab_size = 0;  // lm_head rows (default vocab_size)
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  // vLLM's norm_before_residual: the residual stream starts from hidden_norm(h) instead of h.
  bool norm_before_residual = false;
  // eagle_aux_hidden_state_layer_ids (top level or in eagle_config); empty: the default rule.
  std::vector<int32_t> aux_layer_ids;

  int64_t q_size() const { return int64_t(num_attention_heads) * head_dim; }
  int64_t kv_size() const { return int64_t(num_key_value_heads) * head_dim; }
};

// True for the architecture names vLLM maps to its EAGLE-3 Llama head.
bool is_eagle3_architecture(const std::string& arch);
// True when DIR/config.json exists and names an EAGLE-3 architecture (method inference).
bool dir_holds_eagle3_head(const std::string& dir);

// Reads DIR/config.json. Throws Error naming the file and the field (missing, wrong type, a
// value this engine does not run: num_hidden_layers != 1, rope_scaling, biases, hidden_act).
Eagle3Config read_eagle3_config(const std::string& dir);

// The target layers whose input residual streams feed fc, in order: the config's
// eagle_aux_hidden_state_layer_ids or vLLM's default (2, N / 2, N - 3) for N target layers.
// Throws Error naming the field when there are not 3 or one is outside [0, N).
std::vector<int32_t> eagle3_aux_layers(const Eagle3Config& c, const ModelConfig& target);

// The head against its target: a Qwen3, Qwen3-MoE (or Qwen2) target, hidden sizes, vocabulary, aux
// layers. Throws Error naming the field and both values.
void check_eagle3_target(const Eagle3Config& c, const ModelConfig& target);

}  // namespace pypto
