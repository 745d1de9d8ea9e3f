#pragma once
// config.json of the Qwen3.5 / Qwen3.6 hybrid models (Gated DeltaNet + gated full attention):
//   Qwen3_5ForConditionalGeneration / Qwen3_5MoeForConditionalGeneration (model_type qwen3_5 /
//     qwen3_5_moe): the vision-language wrappers Qwen publishes; the text model's settings sit
//     under `text_config` (model_type qwen3_5_text / qwen3_5_moe_text), its tensors under
//     model.language_model.*; the vision tower (model.visual.*) is not loaded.
//   Qwen3_5ForCausalLM / Qwen3_5MoeForCausalLM: the text-only layout (settings at the top level,
//     tensors under model.*).
// Field meanings follow transformers' Qwen3_5TextConfig / Qwen3_5MoeTextConfig: layer_types (or
// full_attention_interval: layer i is full attention iff (i + 1) % interval == 0), the GDN shape
// linear_{num_key_heads, num_value_heads, key_head_dim, value_head_dim, conv_kernel_dim},
// rope_parameters {rope_theta, partial_rotary_factor, mrope_section} (text-only positions make
// MRoPE plain partial RoPE), and for MoE the routed experts (always renormalised top-k) plus a
// shared expert of shared_expert_intermediate_size scaled by sigmoid(shared_expert_gate(x)).
// Qwen3NextForCausalLM (model_type qwen3_next, transformers' Qwen3NextConfig): the same text model
// with the GDN input projections fused per key head (in_proj_qkvz / in_proj_ba, regrouped at
// staging: model/qwen3_next_layout.h), top-level rope_theta / partial_rotary_factor (default
// 0.25), per-expert tensors, norm_topk_prob as a flag (default true), and dense layers: layer i
// runs the routed experts iff num_experts > 0, (i + 1) % decoder_sparse_step == 0 and i is not in
// mlp_only_layers (ModelConfig::sparse_layer), else a dense MLP of intermediate_size.
// RoPE scaling (rope_parameters, or Qwen3-Next's v4 rope_scaling): default or YaRN
// (io/rope_scaling.h), over the rotary dims int(head_dim · partial_rotary_factor).
#include <nlohmann/json.hpp>
#include <string>

#include "io/model_config.h"

namespace pypto {

// True for the architecture names above.
bool is_hybrid_architecture(const std::string& name);
// "Qwen3_5ForCausalLM, ..." for error messages.
const char* hybrid_architecture_list();
// Parses a hybrid config.json (`j` is the whole file, `path` names it in errors). Throws Error
// naming the field for anything missing, ill-typed or inconsistent.
ModelConfig parse_hybrid_config(const nlohmann::json& j, const std::string& path);

}  // namespace pypto
