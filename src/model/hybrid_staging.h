#pragma once
// Weight staging of the Qwen3.5 / Qwen3.6 hybrids (io/hybrid_config.h): checkpoint tensors under
// the config's tensor_prefix (model.language_model.* in the published wrappers, model.* in the
// text-only layout) → Qwen3Weights with LayerMixer::GatedDeltaNet / GatedAttention layers. The
// vision tower (model.visual.*) and the MTP head (mtp.*) are skipped with one log line each.
// Staged forms: (1 + w) for the zero-centred norms (the GDN output norm stays w); q_proj's
// per-head [query | gate] rows regrouped into the fused qkv as [q | k | v | gate]; the GDN's
// in_proj_qkv, z, b, a fused by rows; −exp(A_log) in f32; fused 3-D experts (gate_up_proj
// [E, 2I, H], down_proj [E, H, I]) or per-expert tensors; the shared expert and its gate.
// --quantization int8 | int4 quantizes the projections, lm_head and embedding as for Qwen3 (the
// GDN's b | a rows, the router and the shared expert's gate stay float).
// Not yet: tensor / pipeline parallelism, pre-quantized (FP8, AWQ, GPTQ) checkpoints, the compile
// cache (each refused by name).
#include <cstddef>

#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/qwen3_weights.h"
#include "model/weight_staging.h"

namespace pypto {

// Checks every tensor the config implies (presence, shape, dtype) and that no tensor under the
// text model's prefix is left unexplained (a layer_types or layer-count mismatch); one Error
// listing every problem.
void validate_hybrid_checkpoint(const Checkpoint& ck);
Qwen3Weights stage_hybrid_weights(const Checkpoint& ck, const Backend& backend, const StagingOptions& opt);
// Bytes stage_hybrid_weights allocates (num_layers >= 0: only that many layers) in `formats`
// (null: float).
size_t hybrid_staged_bytes(const Checkpoint& ck, const Backend& backend, int num_layers = -1,
                           const StagedFormats* formats = nullptr);

}  // namespace pypto
