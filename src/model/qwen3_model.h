#pragma once
// The Qwen3 (and Qwen2) forward pass, written only against the backend op table so another
// backend can run it unchanged. One call runs all new tokens of a ForwardBatch (prefill chunks and
// decodes mixed) through every layer, writing K/V into the paged cache and logits for the rows
// the batch asks for.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/arena.h"
#include "kernels/backend.h"
#include "model/forward_batch.h"
#include "model/gated_deltanet.h"
#include "model/gdn_rollback.h"
#include "model/gdn_state.h"
#include "model/hybrid_blocks.h"
#include "model/kv_cache.h"
#include "model/moe_block.h"
#include "model/qwen3_weights.h"

namespace pypto {

// Tensor-parallel communicator, defined by the parallel layer (src/parallel). The model only
// holds a pointer: null means a single rank.
class Communicator;

class Qwen3Model {
 public:
  // `weights` and `backend` must outlive the model. With weights.tp_size > 1 a communicator is
  // required (each rank computes its own heads / MLP columns, partial sums are all-reduced).
  Qwen3Model(const Qwen3Weights& weights, Backend& backend, Communicator* comm = nullptr);

  const ModelConfig& config() const { return w_.config; }
  int64_t vocab_size() const { return w_.config.vocab_size; }
  // Floats per output row: vocab_size for a generate model, else the pooling head's width
  // (model/pooling_head.h).
  int64_t output_width() const { return w_.pooling.width(w_.config.vocab_size, w_.config.hidden_size); }
  Backend& backend() const { return backend_; }

  // The KV cache shape this model (this rank) reads and writes. Hybrid models (Qwen3.5) keep K/V
  // for their full-attention layers only (at least one pool, so a model cut to GDN layers alone
  // still has a valid cache).
  KvCacheSpec kv_cache_spec(int64_t num_blocks, int32_t block_size, DType dtype) const;
  // Hybrid models: the per-sequence Gated DeltaNet state pool (Qwen3Weights::state_slots slots;
  // ForwardBatch::state_slots index it). Null for the other architectures.
  bool hybrid() const { return gdn_ != nullptr; }
  const GdnStatePool* state_pool() const { return gdn_ ? &states_ : nullptr; }
  // Hybrid configs: the state slots of every rank and stage (Qwen3Weights::state_slots), also on a
  // pipeline stage that holds no GDN layer; 0 for the other architectures.
  int32_t state_slot_count() const { return w_.config.hybrid() ? w_.state_slots : 0; }
  // Speculative decoding on a hybrid: the states kept at draft positions (model/gdn_rollback.h).
  const GdnRollbackStates& rollback_states() const { return rollback_; }

  // Runs batch.num_tokens() tokens through the model. Writes their K/V into `cache` at
  // batch.slot_mapping and logits_out[r, :] (f32, [batch.num_logits(), vocab]) for token row
  // batch.logits_indices[r]. Throws Error for a token id outside the vocabulary.
  // Tensor parallel: every rank runs the same batch (logits rows included: each computes the
  // logits of its vocabulary rows); only rank kLogitsRank receives the full logits, the others'
  // logits_out is ignored and may be null.
  void forward(const ForwardBatch& batch, KvCache& cache, float* logits_out);

  // Pipeline parallelism: this model may hold only a stage of the layers (Qwen3Weights::layer_begin,
  // has_embed, has_head; its KV cache holds just those layers). forward_stage runs the batch
  // through the stage: the first stage embeds batch.token_ids, the others start from hidden_in
  // [T, hidden] f32 (the previous stage's residual stream); the last stage writes logits as
  // forward() does (logits_out, on kLogitsRank of its tensor-parallel group), the others the
  // residual stream after their last layer into hidden_out [T, hidden]. A whole model (one stage)
  // is forward(). The stage's tensor-parallel ranks run it in lockstep as in forward().
  void forward_stage(const ForwardBatch& batch, KvCache& cache, const float* hidden_in, float* hidden_out,
                     float* logits_out);
  bool first_stage() const { return w_.has_embed; }
  bool last_stage() const { return w_.has_head; }
  int64_t hidden_size() const { return hidden_; }
  // The checks forward() makes before its first collective (batch shape against the cache, token
  // ids inside the vocabulary): a pipeline runs them on the whole step's batch on every rank before
  // any rank sends, so a bad batch throws everywhere and nobody waits.
  void check_batch(const ForwardBatch& batch, const KvCache& cache) const;

  // Bytes of MoE expert weights the forward calls so far have read (MoeBlock::expert_bytes_read;
  // 0 for a dense model): the part of a step's reads that depends on the routing.
  uint64_t moe_expert_bytes_read() const { return moe_ ? moe_->expert_bytes_read() : 0; }

  // Speculative decoding (MTP, model/mtp_head.h): while set, each forward of the last stage also
  // writes the final normed hidden state of every row (what lm_head reads for the rows it
  // computes) into out [batch.num_tokens(), hidden]. Null: off (the default).
  void set_normed_hidden_out(float* out) { normed_hidden_out_ = out; }
  // Speculative decoding (EAGLE-3, model/eagle3_head.h): while set, each forward also writes the
  // residual stream of every row as it enters each layer of `layers` (model layer indices, in
  // order; the embedding for layer 0) into out [batch.num_tokens(), layers.size() * hidden], row
  // t's states side by side in the order of `layers`. A pipeline stage writes the column blocks
  // of the layers it holds only (the other stages' ranks write theirs into the same rows,
  // parallel/replicas/eagle3_tp_executor.h); under TP every rank holds the whole residual stream
  // (after each all-reduce), so one rank of the group captures. Null / empty: off (the default),
  // which costs nothing.
  void set_aux_hidden_out(std::vector<int32_t> layers, float* out) {
    aux_layers_ = std::move(layers);
    aux_hidden_out_ = out;
  }

  // The tensor-parallel rank that receives the gathered logits (and samples).
  static constexpr int kLogitsRank = 0;

 private:
  void take_scratch(int64_t rows);
  // x [T, hidden] ← embeddings of batch.token_ids (vocab-parallel: this rank's rows + all-reduce).
  void embed(const ForwardBatch& batch, int64_t T);
  // x [T, hidden] ← this rank's table rows ids[T] (local row indices).
  void lookup(const int32_t* ids, int64_t T);
  // Logits of the n normed rows in h [n, hidden] into logits_out [n, vocab] (vocab-parallel: this
  // rank's columns, gathered onto kLogitsRank; logits_out is null on the other ranks).
  void lm_head(int64_t n, float* logits_out);
  // Tensor-parallel hook: sums x[n] over the ranks after o_proj and down_proj. No-op on one rank.
  void all_reduce(float* x, int64_t n);

  const Qwen3Weights& w_;
  Backend& backend_;
  Communicator* comm_;
  bool vocab_parallel_ = false;    // this rank holds a slice of the vocabulary (embedding, lm_head)
  std::vector<int32_t> local_ids_;  // vocab-parallel lookup: ids relative to the slice [T]

  // Sizes of this rank's slices.
  int64_t hidden_, q_dim_, kv_dim_, qkv_dim_, inter_;

  // Per-step activations, f32, from a per-step arena (reset at the start of every forward; it
  // grows to the high-water mark, so a steady state allocates nothing). Per token row:
  // x, h, tmp [hidden]; qkv [qkv_dim]; q, attn [q_dim]; k, v [kv_dim]; gate_up [2*inter]; act [inter].
  Arena arena_;
  std::unique_ptr<MoeBlock> moe_;  // the MLP of the sparse layers (Qwen3-MoE); null when none

  // Qwen3.5 hybrids: the GDN mixer and its state pool (null / empty otherwise), the shared expert
  // of Qwen3.5-MoE; per staged layer its KV cache layer (full attention) or GDN state layer (-1
  // for the other kind). gate_ [T, q_dim] holds the attention output gate, rot_ [T, nq, rot]
  // the partial-RoPE dims.
  std::unique_ptr<GatedDeltaNet> gdn_;
  GdnStatePool states_;
  GdnRollbackStates rollback_;  // speculative decoding: states at draft positions (Qwen3Weights::state_rollback)
  std::unique_ptr<SharedExpert> shared_;
  std::vector<int32_t> kv_layer_, gdn_layer_;
  int32_t n_kv_layers_ = 0;
  float *gate_ = nullptr, *rot_ = nullptr;
  // Checks each sequence's state slot before the step runs (a fresh sequence's is zeroed) and,
  // after it, records how far each state has advanced.
  void begin_hybrid_step(const ForwardBatch& batch);
  // The attention block of staged layer i over h_ [T, hidden], its output added into x_.
  void attention(const Qwen3LayerWeights& L, int32_t i, const ForwardBatch& batch, KvCache& cache, int64_t T);
  void end_hybrid_step(const ForwardBatch& batch);
  float* normed_hidden_out_ = nullptr;
  std::vector<int32_t> aux_layers_;  // set_aux_hidden_out
  float* aux_hidden_out_ = nullptr;
  // Copies x_ [T, hidden] into column block `j` of aux_hidden_out_ (set_aux_hidden_out).
  void capture_aux(int32_t layer, int64_t T);
  float *x_ = nullptr, *h_ = nullptr, *tmp_ = nullptr, *qkv_ = nullptr, *q_ = nullptr, *k_ = nullptr,
        *v_ = nullptr, *attn_ = nullptr, *gate_up_ = nullptr, *act_ = nullptr;
};

}  // namespace pypto
