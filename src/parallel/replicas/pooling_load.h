#pragma once
// Start-up of a pooling model (--runner, io/pooling_config.h): which task the checkpoint is served
// for, and the pooling head put on its staged weights (model/pooling_head.h).
#include <string>
#include <vector>

#include "engine/model_runner.h"
#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/qwen3_weights.h"

namespace pypto {

// The pooling configuration of the opened checkpoint under eo.runner, and the checks that make it
// servable (a sequence-classification config only with a head). Throws Error naming the flag or
// file.
PoolingConfig resolve_runner(const Checkpoint& ck, const EngineLoadOptions& eo);

// Puts the head `p` asks for on every rank's slice `ws` of one replica (tp x pp of them, any
// order): Hidden for Embed; for Score the f32 copies of the lm_head rows of
// p.classifier_from_token, looked up in the checkpoint's tokenizer (in `model_dir`) and read
// through `backend` from whichever slice stages that row (the last stage's; under --tp each rank
// holds a vocabulary share of the lm_head, tied or not), then given to every slice: the rank
// that receives the step's output computes the head, and every rank reports the same width.
// Generate: nothing.
void attach_pooling_heads(std::vector<Qwen3Weights>& ws, const PoolingConfig& p, const std::string& model_dir,
                          Backend& backend);

}  // namespace pypto
