#pragma once
// --speculative-config method mtp (the checkpoint's own multi-token-prediction head, model/mtp_head.h):
// which method names select it and what the target checkpoint must offer.
#include <string>

namespace pypto {

struct ModelConfig;
struct SpeculativeConfig;

// "mtp", or one of vLLM's older per-model names (qwen3_5_mtp, qwen3_next_mtp), which are accepted
// with a warning naming "mtp".
bool is_mtp_method(const std::string& method);

// The target must be a Qwen3.5 / Qwen3.6 hybrid whose config.json (text_config in the wrapper
// layout) declares its MTP head: mtp_num_hidden_layers 1 (the one layer is reused for every draft
// position, so any num_speculative_tokens up to the global limit is allowed, as vLLM allows), or
// a Qwen3-Next one (Qwen3NextForCausalLM: no key needed; num_nextn_predict_layers, if present, 1).
// Throws Error naming the key or the architecture. (Missing mtp.* tensors are refused when
// staging, naming the tensor.)
void check_mtp_target(const SpeculativeConfig& spec, const ModelConfig& target, const std::string& target_dir);

}  // namespace pypto
