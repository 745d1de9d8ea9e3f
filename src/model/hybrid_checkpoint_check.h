#pragma once
// What a Qwen3.5 / Qwen3.6 / Qwen3-Next checkpoint must hold, from its config.json alone: every
// tensor of the text model and of the MTP head (mtp.*) with its shape and dtype (a projection:
// float in the checkpoint's weight dtype, or pre-quantized as stored, model/hybrid_prequant.h).
// model/hybrid_staging.cpp stages only what these checks passed.
#include <string>

#include "io/checkpoint.h"
#include "io/model_config.h"

namespace pypto {

// Checks every tensor the config implies (presence, shape, dtype) and that no tensor under the
// text model's prefix is left unexplained (a layer_types or layer-count mismatch); one Error
// listing every problem.
void validate_hybrid_checkpoint(const Checkpoint& ck);
// The MTP head's tensors (two [H] norms, fc [H, 2H], one full-attention layer, mtp.norm), when
// --speculative-config method mtp stages it; one Error listing every problem.
void validate_hybrid_mtp_tensors(const Checkpoint& ck);

// "<tensor_prefix>layers.<i>.<suffix>".
std::string hybrid_layer_tensor(const ModelConfig& c, int i, const std::string& suffix);
// Whether the MTP head's layer has routed experts (in place of a dense MLP).
bool hybrid_mtp_layer_sparse(const ModelConfig& c);

}  // namespace pypto
