#pragma once
// Run-time (staged) Qwen3 weights: every tensor in its kernel-ready layout inside one aligned slab
// owned by this object (or a mapped compile-cache file). Built by stage_qwen3_weights().
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/model_config.h"
#include "kernels/backend.h"
#include "model/pooling_head.h"
#include "model/hybrid_weights.h"
#include "model/gdn_prefill.h"

namespace pypto {

// One routed expert of a Qwen3-MoE layer: the dense MLP's SwiGLU at the expert's width I.
struct Qwen3ExpertWeights {
  LinearWeight gate_up;  // [2 * I, hidden]: rows [gate (I) | up (I)]
  LinearWeight down;     // [hidden, I]
};

struct Qwen3LayerWeights {
  const float* input_norm = nullptr;  // [hidden] f32
  // Fused q, k, v projection of this rank's heads: rows [q (nq_r*hd) | k (nkv_r*hd) | v (nkv_r*hd)],
  // logically [(nq_r + 2*nkv_r) * hd, hidden].
  LinearWeight qkv;
  const float* qkv_bias = nullptr;  // [(nq_r + 2*nkv_r) * hd] f32, or nullptr without biases
  const float* q_norm = nullptr;    // [head_dim] f32 (ones when the checkpoint has none)
  const float* k_norm = nullptr;    // [head_dim] f32
  LinearWeight o_proj;              // [hidden, nq_r * hd]
  const float* post_norm = nullptr; // [hidden] f32
  // Fused gate and up projections of this rank's columns: rows [gate (inter_r) | up (inter_r)].
  LinearWeight gate_up;             // [2 * inter_r, hidden]
  LinearWeight down;                // [hidden, inter_r]
  // Qwen3-MoE sparse layer (ModelConfig::sparse_layer): gate_up / down above are empty and the
  // MLP is the router and the experts instead.
  bool sparse = false;
  LinearWeight router;                      // [num_experts, hidden], always Float (never quantized)
  // The experts this rank holds, in the layer format: experts[j] is expert expert_first + j
  // (every expert, first 0, unless --enable-expert-parallel gives each rank its own share).
  std::vector<Qwen3ExpertWeights> experts;
  int64_t expert_first = 0;
  // Qwen3.5 / Qwen3.6 hybrids (model/hybrid_weights.h): a GatedAttention layer uses qkv (rows
  // [q | k | v | gate]), q/k_norm and o_proj above; a GatedDeltaNet layer leaves them empty and
  // holds `gdn` instead. A Qwen3.5-MoE layer adds the shared expert to the routed experts.
  LayerMixer mixer = LayerMixer::Attention;
  GdnLayerWeights gdn;
  SharedExpertWeights shared_expert;
};

// The MTP head of a Qwen3.5 / Qwen3.6 checkpoint (mtp.*, model/mtp_head.h), staged when
// --speculative-config asks for method mtp. Norms staged as (1 + w).
struct MtpHeadWeights {
  bool present = false;
  const float* norm_embed = nullptr;   // [hidden] pre_fc_norm_embedding
  const float* norm_hidden = nullptr;  // [hidden] pre_fc_norm_hidden
  LinearWeight fc;                     // [hidden, 2 hidden]: inputs [normed embedding | normed hidden]
  Qwen3LayerWeights layer;             // one gated full-attention layer with its FFN / MoE
  // [2 nkv_r hd, hidden]: the layer's k | v rows of this rank's KV heads again (those of
  // layer.qkv), for the rows a pass only writes to the MTP KV cache (MtpHead::store_kv).
  LinearWeight kv;
  const float* norm = nullptr;         // [hidden] mtp.norm, before the shared lm_head
};

struct Qwen3Weights {
  ModelConfig config;
  int tp_rank = 0, tp_size = 1;
  int32_t n_heads = 0, n_kv_heads = 0;  // this rank's query / KV heads
  int64_t inter = 0;                    // this rank's intermediate columns (dense layers)
  int64_t moe_inter = 0;                // an expert's intermediate columns (sparse layers)
  // Vocabulary parallelism: this rank holds vocabulary rows [vocab_begin, vocab_begin + vocab_rows)
  // of the embedding table and of lm_head (the whole vocabulary when tp_size == 1). The model
  // looks up only its rows (the others read as zero; an all-reduce completes the embeddings) and
  // computes the logits of its rows, gathered onto rank 0.
  int64_t vocab_begin = 0, vocab_rows = 0;
  // [vocab_rows, hidden] plain, in embed_dtype; with tied embeddings the lm_head's staged copy
  // (embed_in_lm_head: the lookup reads its rows through Backend::weight_rows, whatever the layout).
  const void* embed = nullptr;
  DType embed_dtype = DType::BF16;
  bool embed_in_lm_head = false;
  // An untied table quantized with --quantization: its rows are looked up (dequantized) through
  // Backend::weight_rows; `embed` then points at the same memory. data == nullptr otherwise.
  LinearWeight embed_rows;
  std::string weight_formats = "float";  // StagedFormats::describe() of the staged weights
  WeightFormat layer_format = WeightFormat::Float;  // StagedFormats::layers
  const float* final_norm = nullptr;    // [hidden] f32
  LinearWeight lm_head;                 // [vocab_rows, hidden] (the same memory as embed when tied)
  // A pooling model (--runner pooling): its output rows are this head's instead of the logits
  // (model/pooling_head.h). Set after staging (model/pooling_setup.h); Kind::None generates.
  PoolingHead pooling;
  // Pipeline parallelism: this stage's decoder layers [layer_begin, layer_end) (layers[i] is layer
  // layer_begin + i); has_embed: it holds the embedding (the first stage), has_head: the final
  // norm and lm_head (the last stage). A whole model is [0, num_hidden_layers) with both.
  int layer_begin = 0, layer_end = 0;
  bool has_embed = true, has_head = true;
  std::vector<Qwen3LayerWeights> layers;
  MtpHeadWeights mtp;  // hybrids staged with StagingOptions::mtp; else absent
  // Hybrid models: how many sequences' Gated DeltaNet states the model keeps (its state pool,
  // model/gdn_state.h); the loader sets it to --max-num-seqs. Ignored by the other architectures.
  int32_t state_slots = 1;
  // Hybrid models with prefix caching: snapshot entries of that state beside the slots (copies at
  // cached block boundaries, model/gdn_state.h); the loader sizes them at start-up. 0: none.
  int32_t state_snapshots = 0;
  // Hybrid models with speculative decoding: per state slot, the states a verify step keeps at
  // its draft positions for rollback (model/gdn_rollback.h): the largest k. 0: no speculation.
  int32_t state_rollback = 0;
  // Hybrid models: the gated delta rule's form on prefill rows (--gdn-prefill, model/gdn_prefill.h).
  GdnPrefill gdn_prefill = GdnPrefill::Recurrent;
  size_t resident_bytes = 0;            // size of the slab holding all of the above
  bool from_compile_cache = false;      // the slab was read back from the compile cache
  std::shared_ptr<void> storage;        // keeps the slab (or mapping) alive
};

}  // namespace pypto
