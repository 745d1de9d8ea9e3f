#pragma once
// The keys that say which decoder layers of a MoE model run the routed experts and which the dense
// MLP (ModelConfig::sparse_layer): decoder_sparse_step (default 1) and mlp_only_layers (default
// []), as transformers' Qwen3MoeConfig and Qwen3NextConfig define them. One reader for both
// architectures (io/model_config.cpp, io/hybrid_config.cpp).
#include "io/json_fields.h"
#include "io/model_config.h"

namespace pypto {

// Reads decoder_sparse_step (a positive integer) and mlp_only_layers (indices in
// [0, num_hidden_layers), which must be set first) into c; errors name the field and the file.
void parse_moe_layer_pattern(const JsonFields& f, ModelConfig& c);

}  // namespace pypto
