#pragma once
// The multi-token-prediction (MTP) head of a Qwen3.5 / Qwen3.6 checkpoint (mtp.*, fact sheet
// qwen35-hybrid.md §3.6 and §4.6), which drafts the token after next for speculative decoding.
// For a row pairing the target's final normed hidden state h_t (after its final norm, the state
// its lm_head reads) with the next token x_{t+1}:
//   e = RMSNorm1p(embed(x_{t+1}); pre_fc_norm_embedding)        [H]  (RMSNorm1p: x̂ · (1 + w))
//   h = RMSNorm1p(h_t; pre_fc_norm_hidden)                        [H]
//   m = fc([e | h])                                               [H]  (fc [H, 2H], embedding half first)
//   m = DecoderLayer(m)     one gated full-attention layer with its FFN / MoE, its own KV cache;
//                           the row sits at position t, so the MTP's cache holds positions
//                           0, 1, .. like the target's (the fact sheet places it at t + 1: RoPE
//                           is relative, so shifting every MTP position by one changes nothing
//                           but rounding; the PyTorch reference uses t + 1)
//   out = RMSNorm1p(m; mtp.norm),  logits(x_{t+2}) = lm_head(out)     (embed and lm_head: the target's)
// A second draft step feeds `out` back as the hidden state with the first draft as the token:
// one MTP layer reused step after step.
//
// The decoder layer runs through Qwen3Model as a one-layer last pipeline stage (its input the fc
// output instead of embeddings), so attention, MoE and the KV cache are the target's own code.
//
// Tensor parallelism (--tp): each rank builds the head over its own slice of the target (the MTP
// layer staged like the target's full-attention layers: its query / KV heads, MLP columns or
// expert share; fc and the norms whole; embed_tokens and lm_head vocab-parallel) and its
// communicator; every rank runs forward() on the same batch and hidden rows in lockstep, the
// layer's partial sums are all-reduced as the target's are, the embedding is looked up
// vocab-parallel (bitwise what one rank looks up) and the logits gathered onto
// Qwen3Model::kLogitsRank, the only rank whose logits_out / out_hidden are written.
//
// Pipeline parallelism (--pp, thread ranks): the head runs on the last stage's TP group (it holds
// lm_head, the final norm and the staged MTP layer) and reads the embedding rows from the first
// stage's slice of the same TP rank (`embed_source`: the same vocabulary rows, in the same process).
// With rank processes the first stage is another process: it looks the rows up (lookup_embedding,
// the same lookup and all-reduce) and sends them, and forward() takes them as `embedded`.
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/qwen3_model.h"
#include "model/qwen3_weights.h"

namespace pypto {

class MtpHead {
 public:
  // `target` (staged with StagingOptions::mtp, a whole-model rank or one TP rank's slice of it)
  // and `backend` must outlive the head; `comm` (its TP group; null on one rank) too.
  MtpHead(const Qwen3Weights& target, Backend& backend, Communicator* comm = nullptr);
  // Under --pp: `target` is a last-stage slice (has_head, the MTP head staged), `embed_source` the
  // first-stage slice of the same TP rank (has_embed); both must outlive the head.
  MtpHead(const Qwen3Weights& target, const Qwen3Weights& embed_source, Backend& backend, Communicator* comm);
  // Rank processes under --pp: no slice here holds the embedding (embed_source null); every
  // forward() is given the rows (`embedded`).
  MtpHead(const Qwen3Weights& target, const Qwen3Weights* embed_source, Backend& backend, Communicator* comm);

  // The MTP layer's KV cache: one full-attention layer of the target's attention shape.
  KvCacheSpec kv_cache_spec(int64_t num_blocks, int32_t block_size, DType dtype) const {
    return model_->kv_cache_spec(num_blocks, block_size, dtype);
  }

  // batch: the MTP's rows (token_ids: the next tokens x_{t+1}; positions t; slots in `cache`;
  // logits_indices: the rows whose drafts are wanted). hidden [T, H]: row r's h_t (the target's
  // final normed hidden state, or the previous MTP step's `out`). logits_out [num_logits, vocab];
  // out_hidden (may be null) [T, H]: `out` of every row. Under TP both are written on rank
  // Qwen3Model::kLogitsRank only (the others may pass null).
  // embedded (may be null, required without an embed source) [T, H]: the embedding rows of the
  // batch's token ids (lookup_embedding's), instead of looking them up here.
  void forward(const ForwardBatch& batch, const float* hidden, KvCache& cache, float* logits_out,
               float* out_hidden = nullptr, const float* embedded = nullptr);

  // The same rows' KV only: what forward() writes to the MTP KV cache for `batch`'s rows, bitwise
  // (fc, the layer's input norm, the k | v rows of its qkv (MtpHeadWeights::kv), k_norm, RoPE),
  // without their queries, attention, FFN and outputs: for rows whose `out` and logits no pass
  // reads (the context rows a pass fills in before the row it drafts from). batch: no logits
  // rows. hidden, embedded as for forward(); every TP rank calls it together.
  void store_kv(const ForwardBatch& batch, const float* hidden, KvCache& cache, const float* embedded = nullptr);

  // e [T, H] ← the embedding rows of ids from `w` (a slice holding the embedding; vocab-parallel
  // under TP: this rank's rows, the others zeroed, all-reduced over `comm`, which every TP rank
  // of the group calls together). local_ids: scratch. The ids must be in the vocabulary.
  static void lookup_embedding(const Qwen3Weights& w, Backend& backend, Communicator* comm, const int32_t* ids,
                               int64_t T, float* e, std::vector<int32_t>& local_ids);

 private:
  // e_ [T, H] ← the embeddings of ids (vocab-parallel: this rank's rows + all-reduce).
  void embed(const int32_t* ids, int64_t T);
  // x_ [T, H] ← fc([RMSNorm1p(embed(ids)) | RMSNorm1p(hidden)]): the MTP layer's input.
  void fc_input(const ForwardBatch& batch, const float* hidden, const float* embedded);

  const Qwen3Weights& target_;
  const Qwen3Weights* embed_source_;  // the slice holding the embedding table (target_ unless --pp; null: given)
  Backend& backend_;
  Communicator* comm_;
  std::vector<int32_t> local_ids_;  // vocab-parallel lookup: ids relative to this rank's rows [T]
  Qwen3Weights layer_;  // the one-layer view: mtp.layers.0 as layer 1 of 2, mtp.norm, the target's lm_head
  std::unique_ptr<Qwen3Model> model_;
  std::vector<float> e_, cat_, x_;  // [T, H] embeddings, [T, 2H] fc input, [T, H] fc output
  std::vector<float> kv_, k_, v_, rot_;  // store_kv: [T, 2 kv_r], [T, kv_r] k, v (kv_r = nkv_r hd), RoPE scratch
};

}  // namespace pypto
