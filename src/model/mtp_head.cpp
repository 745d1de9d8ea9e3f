#include "model/mtp_head.h"

#include <cstring>

#include "core/error.h"
#include "model/hybrid_blocks.h"
#include "model/rope_from_config.h"
#include "parallel/communicator.h"

namespace pypto {

MtpHead::MtpHead(const Qwen3Weights& target, Backend& backend, Communicator* comm)
    : MtpHead(target, target, backend, comm) {}

MtpHead::MtpHead(const Qwen3Weights& target, const Qwen3Weights& embed_source, Backend& backend, Communicator* comm)
    : MtpHead(target, &embed_source, backend, comm) {}

MtpHead::MtpHead(const Qwen3Weights& target, const Qwen3Weights* embed_source, Backend& backend, Communicator* comm)
    : target_(target), embed_source_(embed_source), backend_(backend), comm_(comm) {
  if (!target.mtp.present) fail("the MTP head was not staged (the checkpoint has no mtp.* tensors)");
  // The head reads lm_head (the last stage's) and the embedding (the first stage's), each this
  // TP rank's vocabulary rows.
  PYPTO_ASSERT(target.has_head && (!embed_source || embed_source->has_embed),
               "the MTP head needs lm_head and the embedding");
  PYPTO_ASSERT(!embed_source || (embed_source->tp_rank == target.tp_rank && embed_source->tp_size == target.tp_size &&
                                 embed_source->vocab_begin == target.vocab_begin &&
                                 embed_source->vocab_rows == target.vocab_rows),
               "the embedding slice is another TP rank's");
  PYPTO_ASSERT(target.tp_size == 1 || (comm != nullptr && comm->size() == target.tp_size && comm->rank() == target.tp_rank),
               "the MTP head of TP rank ", target.tp_rank, "/", target.tp_size, " needs its group's communicator");
  const ModelConfig& c = target.config;
  layer_.config = c;
  layer_.config.num_hidden_layers = 2;  // the MTP layer sits as the last layer of a two-layer model
  layer_.config.full_attention = {0, 1};
  // Its FFN kind is the staged layer's (model/hybrid_staging.cpp: the rule of the config at
  // layer 0, vLLM's index for "mtp.layers.0"); here it sits at index 1, so the pattern says that.
  layer_.config.decoder_sparse_step = 1;
  layer_.config.mlp_only_layers.clear();
  if (!target.mtp.layer.sparse) layer_.config.mlp_only_layers = {1};
  layer_.tp_rank = target.tp_rank;
  layer_.tp_size = target.tp_size;
  layer_.n_heads = target.n_heads;
  layer_.n_kv_heads = target.n_kv_heads;
  layer_.inter = target.inter;
  layer_.moe_inter = target.moe_inter;
  layer_.vocab_begin = target.vocab_begin;
  layer_.vocab_rows = target.vocab_rows;
  layer_.lm_head = target.lm_head;  // shared: the same staged rows
  layer_.final_norm = target.mtp.norm;
  layer_.layer_begin = 1;
  layer_.layer_end = 2;
  layer_.has_embed = false;
  layer_.has_head = true;
  layer_.layers = {target.mtp.layer};
  layer_.layer_format = target.layer_format;
  model_ = std::make_unique<Qwen3Model>(layer_, backend_, comm);
}

void MtpHead::lookup_embedding(const Qwen3Weights& w, Backend& be, Communicator* comm, const int32_t* ids, int64_t T,
                               float* e, std::vector<int32_t>& local_ids) {
  PYPTO_ASSERT(w.has_embed, "the embedding lookup needs a slice holding the embedding");
  const int64_t H = w.config.hidden_size, v0 = w.vocab_begin, rows = w.vocab_rows;
  const bool vocab_parallel = rows < w.config.vocab_size;
  PYPTO_ASSERT(!vocab_parallel || comm != nullptr, "a vocab-parallel embedding lookup needs its TP group");
  // As Qwen3Model looks its rows up; vocab-parallel: ids outside this rank's rows read row 0 and
  // are zeroed, and the all-reduce (rank order, the others adding +0) gives every row bitwise.
  const int32_t* look = ids;
  if (vocab_parallel) {
    local_ids.resize(size_t(T));
    for (int64_t t = 0; t < T; ++t) local_ids[size_t(t)] = ids[t] >= v0 && ids[t] < v0 + rows ? int32_t(ids[t] - v0) : 0;
    look = local_ids.data();
  }
  if (w.embed_in_lm_head) be.weight_rows(look, T, w.lm_head, e);
  else if (w.embed_rows.data) be.weight_rows(look, T, w.embed_rows, e);
  else be.embedding(look, T, w.embed, w.embed_dtype, H, e);
  be.synchronize();
  if (!vocab_parallel) return;
  for (int64_t t = 0; t < T; ++t)
    if (ids[t] < v0 || ids[t] >= v0 + rows) std::memset(e + t * H, 0, sizeof(float) * size_t(H));
  comm->all_reduce_sum(e, T * H);
}

void MtpHead::embed(const int32_t* ids, int64_t T) {
  lookup_embedding(*embed_source_, backend_, comm_, ids, T, e_.data(), local_ids_);
}

void MtpHead::fc_input(const ForwardBatch& batch, const float* hidden, const float* embedded) {
  const int64_t T = batch.num_tokens(), H = target_.config.hidden_size;
  const float eps = float(target_.config.rms_norm_eps);
  Backend& be = backend_;
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = batch.token_ids[size_t(t)];
    if (id < 0 || id >= target_.config.vocab_size)
      fail("token id ", id, " is outside the vocabulary [0, ", target_.config.vocab_size, ")");
  }
  e_.resize(size_t(T * H));
  cat_.resize(size_t(T * 2 * H));
  x_.resize(size_t(T * H));
  PYPTO_ASSERT(embedded || embed_source_, "the MTP head has no embedding: its rows must be given");
  if (embedded) std::memcpy(e_.data(), embedded, sizeof(float) * size_t(T * H));
  else embed(batch.token_ids.data(), T);  // e [T, H]: the target's embedding rows
  // cat [T, 2H] = [RMSNorm1p(e) | RMSNorm1p(hidden)] (the staged norm weights are 1 + w).
  be.rms_norm(e_.data(), target_.mtp.norm_embed, T, H, eps, e_.data());
  be.rms_norm(hidden, target_.mtp.norm_hidden, T, H, eps, x_.data());
  be.synchronize();
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(cat_.data() + t * 2 * H, e_.data() + t * H, size_t(H) * sizeof(float));
    std::memcpy(cat_.data() + t * 2 * H + H, x_.data() + t * H, size_t(H) * sizeof(float));
  }
  be.linear(cat_.data(), T, target_.mtp.fc, nullptr, x_.data());  // x [T, H] = fc(cat)
  be.synchronize();
}

void MtpHead::forward(const ForwardBatch& batch, const float* hidden, KvCache& cache, float* logits_out,
                      float* out_hidden, const float* embedded) {
  if (batch.num_tokens() == 0) return;
  fc_input(batch, hidden, embedded);
  model_->set_normed_hidden_out(out_hidden);
  model_->forward_stage(batch, cache, x_.data(), nullptr, logits_out);
  model_->set_normed_hidden_out(nullptr);
}

void MtpHead::store_kv(const ForwardBatch& batch, const float* hidden, KvCache& cache, const float* embedded) {
  const int64_t T = batch.num_tokens();
  if (T == 0) return;
  PYPTO_ASSERT(batch.num_logits() == 0, "store_kv computes no logits (", batch.num_logits(), " rows asked)");
  const ModelConfig& c = target_.config;
  const Qwen3LayerWeights& L = target_.mtp.layer;
  PYPTO_ASSERT(L.qkv_bias == nullptr && target_.mtp.kv.n_out > 0, "the MTP layer's k | v rows are staged without biases");
  batch.validate(cache.num_blocks(), cache.block_size());
  fc_input(batch, hidden, embedded);
  Backend& be = backend_;
  const int64_t H = c.hidden_size, nkv = target_.n_kv_heads, hd = c.head_dim, kvd = nkv * hd;
  const float eps = float(c.rms_norm_eps);
  // As Qwen3Model::attention computes them for this layer: input norm, the k | v rows (the same
  // staged rows as in qkv, batch-invariant kernels), k_norm per head, RoPE at the rows' positions.
  kv_.resize(size_t(T * 2 * kvd));
  k_.resize(size_t(T * kvd));
  v_.resize(size_t(T * kvd));
  be.rms_norm(x_.data(), L.input_norm, T, H, eps, x_.data());  // x [T, H] ← h (x is not read again)
  be.linear(x_.data(), T, target_.mtp.kv, nullptr, kv_.data());  // kv [T, k (kvd) | v (kvd)]
  be.synchronize();
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(k_.data() + t * kvd, kv_.data() + t * 2 * kvd, sizeof(float) * size_t(kvd));
    std::memcpy(v_.data() + t * kvd, kv_.data() + t * 2 * kvd + kvd, sizeof(float) * size_t(kvd));
  }
  if (c.qk_norm) be.rms_norm(k_.data(), L.k_norm, T * nkv, int32_t(hd), eps, k_.data());
  const RopeSpec rope = rope_from_config(c);
  if (c.rotary_dim > 0 && c.rotary_dim < hd) {
    be.synchronize();
    rot_.resize(size_t(T * nkv * c.rotary_dim));
    partial_rope(be, k_.data(), batch.positions.data(), T, int32_t(nkv), int32_t(hd), c.rotary_dim, rope, rot_.data());
  } else {
    be.rope(k_.data(), batch.positions.data(), T, int32_t(nkv), int32_t(hd), rope);
  }
  be.kv_store(k_.data(), v_.data(), batch.slot_mapping.data(), T, cache.layer(0));
  be.synchronize();
}

}  // namespace pypto
