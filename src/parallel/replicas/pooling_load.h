#pragma once
// Start-up of a pooling model (--runner, io/pooling_config.h): which task the checkpoint is served
// for, and the pooling head put on its staged weights (model/pooling_head.h).
#include <string>

#include "engine/model_runner.h"
#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/qwen3_weights.h"

namespace pypto {

// The pooling configuration of the opened checkpoint under eo.runner, and the checks that make it
// servable: one rank per replica (no --tp, --pp), a sequence-classification config only with a
// head. Throws Error naming the flag or file.
PoolingConfig resolve_runner(const Checkpoint& ck, const EngineLoadOptions& eo, int tp, int pp);

// Puts the head `p` asks for on `w`: Hidden for Embed; for Score the f32 copies of the lm_head
// rows of p.classifier_from_token, looked up in the checkpoint's tokenizer (in `model_dir`) and
// read through `backend` from the staged lm_head (tied or not). Generate: nothing.
void attach_pooling_head(Qwen3Weights& w, const PoolingConfig& p, const std::string& model_dir, Backend& backend);

}  // namespace pypto
