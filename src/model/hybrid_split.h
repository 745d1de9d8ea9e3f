#pragma once
// What one rank of a Qwen3.5 / Qwen3.6 hybrid stages, before anything is read: the checks that a
// --tp split is whole, and the bytes staging will allocate (for the memory plan and the tests).
#include <cstddef>

#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/weight_staging.h"

namespace pypto {

// --tp N on a hybrid: every split must be whole (heads, GDN key heads with their value heads,
// intermediate columns, experts' columns, or whole experts with --enable-expert-parallel) and,
// for int4, a row-parallel rank's columns whole quantization groups. Each refusal names the field
// and the split.
void check_hybrid_tp(const ModelConfig& c, int tp, const StagedFormats& f);

// Bytes stage_hybrid_weights allocates in `formats` (null: float) for rank tp_rank of tp_size and
// the pipeline stage holding layers `range` (with the embedding / lm_head and final norm when it
// holds the first / last layer); num_layers >= 0 counts only that many layers of the stage.
size_t hybrid_staged_bytes(const Checkpoint& ck, const Backend& backend, int num_layers = -1,
                           const StagedFormats* formats = nullptr, int tp_rank = 0, int tp_size = 1,
                           LayerRange range = {});

}  // namespace pypto
