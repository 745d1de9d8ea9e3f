#pragma once
// The model hyper-parameters read from a checkpoint's config.json (Qwen3ForCausalLM,
// Qwen2ForCausalLM and Qwen3MoeForCausalLM) plus generation_config.json's eos ids when present.
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/pooling_config.h"
#include "io/quant_config.h"
#include "io/rope_scaling.h"

namespace pypto {

// Qwen35 / Qwen35Moe: the Qwen3.5 / Qwen3.6 hybrids (Gated DeltaNet + gated attention layers;
// io/hybrid_config.h), dense and MoE, in their wrapper or text-only layouts.
enum class ModelArch { Qwen3, Qwen2, Qwen3Moe, Qwen35, Qwen35Moe };

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
  // Pooling (embedding / score) models (io/pooling_config.h): task Score from a
  // Qwen3ForSequenceClassification config; the rest is resolved at load (--runner).
  PoolingConfig pooling;

  // Qwen3-MoE (Qwen3MoeForCausalLM; 0 experts for the dense architectures). A sparse layer
  // replaces the dense MLP with a router [num_experts, hidden] and num_experts SwiGLU experts of
  // width moe_intermediate_size, of which each token uses its num_experts_per_tok most probable.
  int32_t num_experts = 0;            // config key num_experts (transformers v5: num_local_experts)
  int32_t num_experts_per_tok = 0;    // top-k, in [1, num_experts]
  int64_t moe_intermediate_size = 0;  // per-expert FFN width
  int32_t decoder_sparse_step = 1;    // layer i is sparse when (i + 1) % step == 0 ...
  std::vector<int32_t> mlp_only_layers;  // ... and i is not listed here (dense MLP layers)
  bool norm_topk_prob = false;        // renormalise the k selected probabilities to sum to 1

  // Qwen3.5 / Qwen3.6 hybrids (io/hybrid_config.h); all zero / empty for the other architectures.
  // full_attention[i]: layer i is gated full attention, else a Gated DeltaNet (linear attention).
  std::vector<uint8_t> full_attention;
  int32_t linear_num_key_heads = 0, linear_num_value_heads = 0;  // n_k, n_v (n_v a multiple of n_k)
  int32_t linear_key_head_dim = 0, linear_value_head_dim = 0;    // d_k, d_v
  int32_t linear_conv_kernel_dim = 0;                            // K of the causal depthwise conv
  int32_t rotary_dim = 0;                      // RoPE on dims [0, rotary_dim) of a head; 0: all of head_dim
  int64_t shared_expert_intermediate_size = 0; // Qwen3.5-MoE's gated shared expert (0: none)
  // Where the text model's tensors live: "model." (text-only *ForCausalLM) or
  // "model.language_model." (the published *ForConditionalGeneration wrappers).
  std::string tensor_prefix = "model.";
  bool multimodal_wrapper = false;  // config.json is the vision-language wrapper (text_config)

  bool hybrid() const { return arch == ModelArch::Qwen35 || arch == ModelArch::Qwen35Moe; }
  bool full_attention_layer(int32_t i) const { return !hybrid() || full_attention[size_t(i)] != 0; }
  int32_t num_full_attention_layers() const;  // layers with a KV cache (all of them unless hybrid)
  int64_t gdn_key_dim() const { return int64_t(linear_num_key_heads) * linear_key_head_dim; }
  int64_t gdn_value_dim() const { return int64_t(linear_num_value_heads) * linear_value_head_dim; }
  int64_t gdn_conv_dim() const { return 2 * gdn_key_dim() + gdn_value_dim(); }  // q | k | v channels

  int64_t q_size() const { return int64_t(num_attention_heads) * head_dim; }   // q rows
  int64_t kv_size() const { return int64_t(num_key_value_heads) * head_dim; }  // k (or v) rows
  // transformers' rule (Qwen3MoeDecoderLayer): layer i runs the routed experts iff num_experts > 0,
  // (i + 1) % decoder_sparse_step == 0 and i is not in mlp_only_layers; else the dense MLP.
  bool sparse_layer(int32_t i) const;
  bool has_sparse_layers() const;  // any layer is sparse
  bool has_dense_layers() const;   // any layer runs the dense MLP (intermediate_size)
};

// Parses config.json text (`path` is used in messages). Throws Error naming the field and the
// file when a field is missing or ill-typed, or names an unsupported architecture/rope_scaling or
// quantization_config (io/quant_config.h).
ModelConfig parse_model_config(const std::string& json_text, const std::string& path);
// Reads generation_config.json text and merges its eos_token_id(s) into cfg.
void merge_generation_config(ModelConfig& cfg, const std::string& json_text, const std::string& path);

}  // namespace pypto
