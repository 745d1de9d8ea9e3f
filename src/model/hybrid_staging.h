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
// --tp N: each rank stages its share of the attention heads, the GDN key heads with their value
// heads (in_proj rows, conv channels, dt_bias, A_log; out_proj columns), the MLP / expert /
// shared-expert intermediate columns (or whole routed experts with --enable-expert-parallel) and
// the vocabulary (model/gdn_state.h gdn_rank_config). --pp N: a stage stages its layer range, the
// embedding with layer 0 and the final norm and lm_head with the last layer.
// Qwen3NextForCausalLM: the GDN's in_proj_qkvz / in_proj_ba rows are picked per key head into the
// same [q | k | v | z | b | a] order (model/qwen3_next_layout.h); experts per expert.
// Pre-quantized checkpoints (block FP8, AWQ, GPTQ-Int4; model/hybrid_prequant.h): each projection
// stored quantized is staged in its format as stored (rows regrouped and fused like float ones),
// the others in the checkpoint's float dtype.
// --use-compile-cache: the staged bytes go to one slab, written to the cache on a cold start and
// read back on a warm one (keyed by checkpoint, backend, rank, formats, layer range, expert
// parallelism and the MTP head; model/hybrid_slabs.h).
// The --tp checks and the staged sizes: model/hybrid_split.h; the tensors a checkpoint must hold
// (checked before staging): model/hybrid_checkpoint_check.h.
#include <cstddef>

#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/qwen3_weights.h"
#include "model/weight_staging.h"

namespace pypto {

Qwen3Weights stage_hybrid_weights(const Checkpoint& ck, const Backend& backend, const StagingOptions& opt);

}  // namespace pypto
