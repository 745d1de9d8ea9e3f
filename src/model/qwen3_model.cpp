#include "model/qwen3_model.h"

#include "core/profiler.h"

#include <cstring>

#include "core/error.h"
#include "model/rope_from_config.h"
#include "parallel/communicator.h"

namespace pypto {

Qwen3Model::Qwen3Model(const Qwen3Weights& weights, Backend& backend, Communicator* comm)
    : w_(weights), backend_(backend), comm_(comm) {
  const ModelConfig& c = w_.config;
  PYPTO_ASSERT(w_.layer_begin >= 0 && w_.layer_begin + int(w_.layers.size()) <= c.num_hidden_layers &&
                   w_.has_embed == (w_.layer_begin == 0) &&
                   w_.has_head == (w_.layer_begin + int(w_.layers.size()) == c.num_hidden_layers),
               "staged layers [", w_.layer_begin, ", +", w_.layers.size(), ") of ", c.num_hidden_layers);
  PYPTO_ASSERT(w_.n_heads > 0 && w_.n_kv_heads > 0 && w_.n_heads % w_.n_kv_heads == 0, "heads ", w_.n_heads, "/",
               w_.n_kv_heads);
  if (w_.tp_size > 1 && comm_ == nullptr)
    fail("tensor parallel rank ", w_.tp_rank, "/", w_.tp_size, " needs a communicator");
  hidden_ = c.hidden_size;
  q_dim_ = int64_t(w_.n_heads) * c.head_dim;
  kv_dim_ = int64_t(w_.n_kv_heads) * c.head_dim;
  qkv_dim_ = q_dim_ + 2 * kv_dim_;
  inter_ = w_.inter;
  for (size_t i = 0; i < w_.layers.size(); ++i) {
    const Qwen3LayerWeights& l = w_.layers[i];
    PYPTO_ASSERT(l.qkv.n_out == qkv_dim_ && l.qkv.k_in == hidden_, "qkv shape");
    PYPTO_ASSERT(l.o_proj.n_out == hidden_ && l.o_proj.k_in == q_dim_, "o_proj shape");
    PYPTO_ASSERT(!c.attention_bias || l.qkv_bias != nullptr, "attention_bias without staged biases");
    PYPTO_ASSERT(l.sparse == c.sparse_layer(w_.layer_begin + int32_t(i)), "layer ", w_.layer_begin + int32_t(i),
                 " staged ", l.sparse ? "sparse" : "dense", " against the config");
    if (!l.sparse) {
      PYPTO_ASSERT(l.gate_up.n_out == 2 * inter_ && l.gate_up.k_in == hidden_, "gate_up shape");
      PYPTO_ASSERT(l.down.n_out == hidden_ && l.down.k_in == inter_, "down shape");
      continue;
    }
    PYPTO_ASSERT(l.router.n_out == c.num_experts && l.router.k_in == hidden_ && l.router.format == WeightFormat::Float,
                 "router shape");
    PYPTO_ASSERT(int32_t(l.experts.size()) == c.num_experts, "experts ", l.experts.size());
    for (const Qwen3ExpertWeights& x : l.experts) {
      PYPTO_ASSERT(x.gate_up.n_out == 2 * w_.moe_inter && x.gate_up.k_in == hidden_, "expert gate_up shape");
      PYPTO_ASSERT(x.down.n_out == hidden_ && x.down.k_in == w_.moe_inter, "expert down shape");
    }
    if (!moe_)
      moe_ = std::make_unique<MoeBlock>(backend_, hidden_, w_.moe_inter, c.num_experts, c.num_experts_per_tok,
                                        c.norm_topk_prob);
  }
  // The experts are not sharded (weight staging refuses Qwen3-MoE under --tp).
  PYPTO_ASSERT(!moe_ || w_.tp_size == 1, "Qwen3-MoE layers on tensor-parallel rank ", w_.tp_rank, "/", w_.tp_size);
  PYPTO_ASSERT(w_.vocab_rows > 0 && w_.vocab_begin >= 0 && w_.vocab_begin + w_.vocab_rows <= c.vocab_size,
               "vocabulary slice [", w_.vocab_begin, ", +", w_.vocab_rows, ") of ", c.vocab_size);
  PYPTO_ASSERT(!(w_.has_head || (w_.has_embed && w_.embed_in_lm_head)) ||
                   (w_.lm_head.n_out == w_.vocab_rows && w_.lm_head.k_in == hidden_),
               "lm_head shape");
  vocab_parallel_ = w_.vocab_rows < c.vocab_size;
  if (vocab_parallel_ && comm_ == nullptr)
    fail("rank ", w_.tp_rank, "/", w_.tp_size, " holds vocabulary rows [", w_.vocab_begin, ", ",
         w_.vocab_begin + w_.vocab_rows, ") only and needs a communicator");
}

KvCacheSpec Qwen3Model::kv_cache_spec(int64_t num_blocks, int32_t block_size, DType dtype) const {
  KvCacheSpec s;
  s.num_layers = static_cast<int32_t>(w_.layers.size());  // this stage's layers
  s.num_blocks = num_blocks;
  s.block_size = block_size;
  s.n_kv_heads = w_.n_kv_heads;
  s.head_dim = w_.config.head_dim;
  s.dtype = dtype;
  return s;
}

void Qwen3Model::take_scratch(int64_t rows) {
  arena_.reset();  // everything from the previous step is dead
  auto take = [&](int64_t per_row) { return arena_.alloc_array<float>(size_t(per_row * rows)); };
  x_ = take(hidden_);
  h_ = take(hidden_);
  tmp_ = take(hidden_);
  qkv_ = take(qkv_dim_);
  q_ = take(q_dim_);
  k_ = take(kv_dim_);
  v_ = take(kv_dim_);
  attn_ = take(q_dim_);
  gate_up_ = take(2 * inter_);
  act_ = take(inter_);
  if (moe_) moe_->take_scratch(arena_, rows);
}

void Qwen3Model::all_reduce(float* x, int64_t n) {
  if (comm_ == nullptr) return;
  comm_->all_reduce_sum(x, n);  // every rank of the group calls this at the same point
}

void Qwen3Model::lookup(const int32_t* ids, int64_t T) {
  if (w_.embed_in_lm_head) backend_.weight_rows(ids, T, w_.lm_head, x_);  // tied: one staged copy
  else if (w_.embed_rows.data) backend_.weight_rows(ids, T, w_.embed_rows, x_);  // a quantized table
  else backend_.embedding(ids, T, w_.embed, w_.embed_dtype, hidden_, x_);
}

void Qwen3Model::embed(const ForwardBatch& batch, int64_t T) {
  Backend& be = backend_;
  if (!vocab_parallel_) {
    lookup(batch.token_ids.data(), T);  // x [T, hidden]
    return;
  }
  // Vocab-parallel lookup: this rank's table holds rows [v0, v0 + rows). Ids outside it read any
  // local row (row 0) and are then zeroed, so x [T, hidden] holds this rank's rows and zeros; the
  // all-reduce sums the ranks' x in rank order, and as exactly one rank holds each row (the others
  // add +0) every embedding arrives bitwise as a single rank would have looked it up.
  const int64_t v0 = w_.vocab_begin, rows = w_.vocab_rows;
  local_ids_.resize(size_t(T));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = batch.token_ids[t];
    local_ids_[size_t(t)] = (id >= v0 && id < v0 + rows) ? int32_t(id - v0) : 0;
  }
  lookup(local_ids_.data(), T);
  be.synchronize();  // the zeroing below is host code
  for (int64_t t = 0; t < T; ++t) {
    const int64_t id = batch.token_ids[t];
    if (id < v0 || id >= v0 + rows) std::memset(x_ + t * hidden_, 0, sizeof(float) * size_t(hidden_));
  }
  all_reduce(x_, T * hidden_);
}

void Qwen3Model::lm_head(int64_t n, float* logits_out) {
  Backend& be = backend_;
  if (!vocab_parallel_) {
    be.linear(h_, n, w_.lm_head, nullptr, logits_out);  // logits [n, vocab]
    be.synchronize();
    return;
  }
  // Vocab-parallel: this rank's logits [n, vocab_rows] for its vocabulary rows, then the column
  // blocks of all ranks are gathered, in rank order (= vocabulary order), into rank 0's
  // logits_out [n, vocab]. Each logit is the same dot product a single rank computes. (part lives
  // in the step arena: n is the sampling rows of a step, e.g. 32 x 75968 floats = 9.7 MB at TP=2.)
  float* part = arena_.alloc_array<float>(size_t(n * w_.vocab_rows));
  be.linear(h_, n, w_.lm_head, nullptr, part);
  be.synchronize();
  PYPTO_PROF_OP("lm_head.gather");
  comm_->gather_columns(part, n, w_.vocab_rows, logits_out, kLogitsRank);
}

void Qwen3Model::check_batch(const ForwardBatch& batch, const KvCache& cache) const {
  const ModelConfig& c = w_.config;
  PYPTO_ASSERT(cache.num_layers() == int32_t(w_.layers.size()) && cache.spec().n_kv_heads == w_.n_kv_heads &&
                   cache.spec().head_dim == c.head_dim,
               "KV cache shape does not match the model");
  batch.validate(cache.num_blocks(), cache.block_size());
  for (int64_t t = 0; t < batch.num_tokens(); ++t) {
    const int32_t id = batch.token_ids[t];
    if (id < 0 || id >= c.vocab_size) fail("token id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")");
  }
}

void Qwen3Model::forward(const ForwardBatch& batch, KvCache& cache, float* logits_out) {
  PYPTO_ASSERT(first_stage() && last_stage(), "forward() of a pipeline stage: use forward_stage()");
  forward_stage(batch, cache, nullptr, nullptr, logits_out);
}

void Qwen3Model::forward_stage(const ForwardBatch& batch, KvCache& cache, const float* hidden_in, float* hidden_out,
                               float* logits_out) {
  const ModelConfig& c = w_.config;
  const int64_t T = batch.num_tokens();
  if (T == 0) return;
  PYPTO_PROF_SPAN(prof::Level::E2E, "forward", "host.validate", -1, "op");  // profiling: ops below
  check_batch(batch, cache);
  PYPTO_ASSERT(first_stage() || hidden_in != nullptr, "a later pipeline stage needs the hidden states");
  PYPTO_ASSERT(last_stage() || hidden_out != nullptr, "an earlier pipeline stage needs a hidden-state output");
  // Checked before the first collective: a rank that threw later would leave the others waiting.
  const bool receives = comm_ == nullptr || comm_->rank() == kLogitsRank;
  PYPTO_ASSERT(!last_stage() || !receives || batch.num_logits() == 0 || logits_out != nullptr,
               "logits requested without an output buffer");
  take_scratch(T);
  Backend& be = backend_;
  const int32_t hd = c.head_dim;
  const float eps = float(c.rms_norm_eps);
  const RopeSpec rope = rope_from_config(c);  // plain or YaRN
  const AttentionBatch attn_batch = batch.attention();

  // x [T, hidden]: the residual stream.
  PYPTO_PROF_OP("embedding");
  if (first_stage()) embed(batch, T);
  else std::memcpy(x_, hidden_in, sizeof(float) * size_t(T * hidden_));  // the previous stage's x

  PYPTO_PROF_PHASE(prof::Level::Kernel, "layers");
  for (int32_t i = 0; i < int32_t(w_.layers.size()); ++i) {
    const int32_t li = w_.layer_begin + i;  // the model's layer index (profiles name it)
    PYPTO_PROF_LAYER(li, "norm.input");
    const Qwen3LayerWeights& L = w_.layers[size_t(i)];
    // --- attention block ---
    be.rms_norm(x_, L.input_norm, T, hidden_, eps, h_);        // h [T, hidden]
    PYPTO_PROF_OP("attention.qkv_proj");
    be.linear(h_, T, L.qkv, L.qkv_bias, qkv_);                 // qkv [T, q_dim | kv_dim | kv_dim]
    // Split the fused rows into contiguous q [T, nq, hd], k, v [T, nkv, hd]: the per-head ops
    // below take dense [rows, heads, head_dim] arrays.
    PYPTO_PROF_OP("host.qkv_split");
    for (int64_t t = 0; t < T; ++t) {
      const float* row = qkv_ + t * qkv_dim_;
      std::memcpy(q_ + t * q_dim_, row, sizeof(float) * q_dim_);
      std::memcpy(k_ + t * kv_dim_, row + q_dim_, sizeof(float) * kv_dim_);
      std::memcpy(v_ + t * kv_dim_, row + q_dim_ + kv_dim_, sizeof(float) * kv_dim_);
    }
    PYPTO_PROF_OP("norm.qk");
    if (c.qk_norm) {  // Qwen3: RMSNorm over each head's head_dim values, before RoPE
      be.rms_norm(q_, L.q_norm, T * w_.n_heads, hd, eps, q_);
      be.rms_norm(k_, L.k_norm, T * w_.n_kv_heads, hd, eps, k_);
    }
    PYPTO_PROF_OP("attention.core");  // rope, kv store, paged attention
    be.rope(q_, batch.positions.data(), T, w_.n_heads, hd, rope);
    be.rope(k_, batch.positions.data(), T, w_.n_kv_heads, hd, rope);
    const KvCacheLayer& kv = cache.layer(i);  // this stage's cache holds its layers only
    be.kv_store(k_, v_, batch.slot_mapping.data(), T, kv);
    be.paged_attention(q_, T, w_.n_heads, kv, attn_batch, attn_);  // attn [T, nq, hd]
    PYPTO_PROF_OP("attention.o_proj");
    be.linear(attn_, T, L.o_proj, nullptr, tmp_);                  // tmp [T, hidden] (partial under TP)
    PYPTO_PROF_OP("residual.add");
    all_reduce(tmp_, T * hidden_);
    be.add_inplace(x_, tmp_, T * hidden_);
    // --- MLP block ---
    PYPTO_PROF_OP("norm.post");
    be.rms_norm(x_, L.post_norm, T, hidden_, eps, h_);
    if (L.sparse) {  // Qwen3-MoE: routed experts in place of the dense MLP (one rank only)
      moe_->forward(L, h_, T, tmp_);                 // tmp [T, hidden]
      PYPTO_PROF_OP("residual.add");
      be.add_inplace(x_, tmp_, T * hidden_);
      continue;
    }
    PYPTO_PROF_OP("mlp.gate_up");
    be.linear(h_, T, L.gate_up, nullptr, gate_up_);  // gate_up [T, gate (inter) | up (inter)]
    PYPTO_PROF_OP("mlp.silu_mul");
    be.silu_mul(gate_up_, T, inter_, act_);          // act [T, inter]
    PYPTO_PROF_OP("mlp.down");
    be.linear(act_, T, L.down, nullptr, tmp_);       // tmp [T, hidden] (partial under TP)
    PYPTO_PROF_OP("residual.add");
    all_reduce(tmp_, T * hidden_);
    be.add_inplace(x_, tmp_, T * hidden_);
  }

  // Final norm and lm_head only for the rows that need logits: gather them into h [n, hidden].
  // (n is the same on every rank: they run the same batch.)
  if (!last_stage()) {
    be.synchronize();
    std::memcpy(hidden_out, x_, sizeof(float) * size_t(T * hidden_));  // to the next stage
    return;
  }
  PYPTO_PROF_OP("host.gather");
  const int64_t n = batch.num_logits();
  if (n == 0) return;
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(h_ + r * hidden_, x_ + int64_t(batch.logits_indices[r]) * hidden_, sizeof(float) * hidden_);
  PYPTO_PROF_OP("norm.final");
  be.rms_norm(h_, w_.final_norm, n, hidden_, eps, h_);
  if (w_.pooling.kind != PoolingHead::Kind::None) {  // embeddings / scores instead of logits
    PYPTO_PROF_OP("pooling_head");
    be.synchronize();
    if (receives) pooling_head_forward(w_.pooling, h_, n, hidden_, logits_out);
    return;
  }
  PYPTO_PROF_OP("lm_head");
  lm_head(n, receives ? logits_out : nullptr);
}

}  // namespace pypto
