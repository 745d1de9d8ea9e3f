#pragma once
// Layer-by-layer weight staging: checkpoint tensors (mmap) → one aligned slab in the backend's
// run-time layout, for one tensor-parallel rank. Each layer is read, sliced for the rank,
// converted/packed into its slot of the preallocated slab, and its source pages are released
// before the next layer, so peak memory stays close to the final resident size.
#include <functional>

#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/qwen3_weights.h"

namespace pypto {

// Checks every tensor the config implies — presence, shape and dtype — before anything is
// staged, and throws one Error listing all offending tensors. q_norm/k_norm may be absent
// (staged as ones).
void validate_qwen3_checkpoint(const Checkpoint& ck);

struct StagingOptions {
  int tp_rank = 0;
  int tp_size = 1;
  bool show_progress = true;  // a progress line on a terminal (quiet otherwise)
  // Compile cache directory (--use-compile-cache); empty: always stage from the checkpoint.
  std::string compile_cache_dir;
  // --quantization: Float keeps the checkpoint's weights; Int8 / Int4 quantize an unquantized
  // checkpoint's projections, lm_head and embedding while staging (int4 in groups of int4_group
  // inputs). Pre-quantized checkpoints (FP8, AWQ) are staged in their own format; asking to
  // quantize one again is an error.
  WeightFormat quantization = WeightFormat::Float;
  int32_t int4_group = 64;
  // Pipeline parallelism (--pp): stage only decoder layers [layer_begin, layer_end) (layer_end -1:
  // to the last). The stage holding layer 0 also stages the embedding table, the stage holding the
  // last layer the final norm and lm_head (a tied table is staged by both). The compile cache key
  // includes the range, so the slabs of different stages never meet.
  int layer_begin = 0, layer_end = -1;
  // --enable-expert-parallel: under --tp, each rank holds whole experts (num_experts / tp of
  // them) instead of every expert's share of intermediate columns (model/moe_staging.h).
  bool expert_parallel = false;
  // Qwen3.5 / Qwen3.6 hybrids: also stage the MTP head (mtp.*) for speculative decoding (an Error
  // naming the missing tensor when the checkpoint has none).
  bool mtp = false;
};

// A stage's decoder layers [begin, end) (end -1: through the last layer).
struct LayerRange {
  int begin = 0, end = -1;
};
// The range with end resolved (-1: the last layer); Error naming the range when it is not a
// non-empty range inside the model.
LayerRange resolve_range(const ModelConfig& c, LayerRange range);

// The formats one staging run uses, from the checkpoint's quantization_config and the option:
// `layers` for the seven projections, `head` for lm_head and the embedding table.
struct StagedFormats {
  WeightFormat layers = WeightFormat::Float, head = WeightFormat::Float;
  int32_t group = 0;          // inputs per scale (int4 / fp8)
  // How Qwen3-MoE experts are divided among TP ranks (StagingOptions::expert_parallel): not a
  // format, but it shapes the slab the same way, so staged_slab_bytes sees it here.
  bool expert_parallel = false;
  // The hybrid's MTP head is staged too (StagingOptions::mtp): on the rank holding the last layer.
  bool mtp = false;
  std::string describe() const;  // "float", "int8", "int4/g64", "fp8/b128 (checkpoint)", ...
};
StagedFormats staged_formats(const Checkpoint& ck, WeightFormat quantization, int32_t int4_group);

// A --quantization value: "none" (Float), "int8" or "int4"; anything else is an Error naming them.
WeightFormat parse_quantization(const std::string& s);
// What the products of weights whose layers are `layers` multiply W with on `backend`: "" for
// float weights, else "bf16x2 activations", "int16 activations", "int8 activations" or "f32
// activations" (FP8 always runs f32).
const char* quantized_activations(WeightFormat layers, const Backend& backend);

// Stages the weights of rank tp_rank of tp_size: query/KV heads, intermediate columns and the
// matching o_proj/down_proj input columns are this rank's share (Megatron-style); so are the
// vocabulary rows of the embedding table and of lm_head (vocab_slice below: vocab-parallel, so a
// rank holds ~1/tp of every large tensor — for tied-embedding models the table is most of the
// bytes); only the norms are replicated.
Qwen3Weights stage_qwen3_weights(const Checkpoint& ck, const Backend& backend, const StagingOptions& opt);

// Bytes stage_qwen3_weights would allocate for rank tp_rank of tp_size on `backend` (the slab),
// computed from the checkpoint's shapes alone (validated by the caller): the start-up's memory
// check runs it before staging. num_layers >= 0 counts only that many layers (what would fit).
// formats: nullptr stages the checkpoint as it is (staged_formats(ck, Float, ...)).
// range: the bytes of a pipeline stage holding those layers (and the embedding / lm_head when it
// holds the first / last layer); num_layers >= 0 then counts layers of that stage.
size_t staged_slab_bytes(const Checkpoint& ck, const Backend& backend, int tp_rank, int tp_size, int num_layers = -1,
                         const StagedFormats* formats = nullptr, LayerRange range = {});

// Rank tp_rank's vocabulary rows [begin, end) of `vocab`: contiguous, in rank order, sizes
// differing by at most one row when tp_size does not divide the vocabulary.
struct VocabSlice {
  int64_t begin = 0, end = 0;
};
VocabSlice vocab_slice(int64_t vocab, int tp_size, int tp_rank);

}  // namespace pypto
