#include "model/qwen3_model.h"

#include "core/profiler.h"

#include <algorithm>
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
  // A gated-attention layer's qkv carries the output gate rows too: [q | k | v | gate].
  if (c.hybrid()) qkv_dim_ += q_dim_;
  int32_t n_gdn = 0;
  for (size_t i = 0; i < w_.layers.size(); ++i) {
    const Qwen3LayerWeights& l = w_.layers[i];
    const int32_t li = w_.layer_begin + int32_t(i);
    PYPTO_ASSERT(c.hybrid() ? l.mixer != LayerMixer::Attention : l.mixer == LayerMixer::Attention, "layer ", li,
                 " mixer does not match ", c.architecture);
    PYPTO_ASSERT(!c.hybrid() || (l.mixer == LayerMixer::GatedAttention) == c.full_attention_layer(li), "layer ", li,
                 " staged as the other kind than layer_types says");
    if (l.mixer == LayerMixer::GatedDeltaNet) {
      const GdnLayerWeights& g = l.gdn;
      const ModelConfig gc = gdn_rank_config(w_.config, w_.tp_size);  // this rank's GDN heads
      PYPTO_ASSERT(g.in_proj.k_in == hidden_ &&
                       g.in_proj.n_out + g.in_proj_ba.n_out ==
                           gc.gdn_conv_dim() + gc.gdn_value_dim() + 2 * gc.linear_num_value_heads &&
                       (g.in_proj_ba.n_out == 0 || g.in_proj_ba.k_in == hidden_),
                   "GDN in_proj shape");
      PYPTO_ASSERT(g.out_proj.n_out == hidden_ && g.out_proj.k_in == gc.gdn_value_dim(), "GDN out_proj shape");
      PYPTO_ASSERT(g.conv && g.dt_bias && g.neg_exp_a && g.norm, "GDN vectors");
      kv_layer_.push_back(-1);
      gdn_layer_.push_back(n_gdn++);
    } else {
      PYPTO_ASSERT(l.qkv.n_out == qkv_dim_ && l.qkv.k_in == hidden_, "qkv shape");
      PYPTO_ASSERT(l.o_proj.n_out == hidden_ && l.o_proj.k_in == q_dim_, "o_proj shape");
      PYPTO_ASSERT(!c.attention_bias || l.qkv_bias != nullptr, "attention_bias without staged biases");
      kv_layer_.push_back(n_kv_layers_++);
      gdn_layer_.push_back(-1);
    }
    PYPTO_ASSERT(l.sparse == c.sparse_layer(li), "layer ", li, " staged ", l.sparse ? "sparse" : "dense",
                 " against the config");
    if (!l.sparse) {
      PYPTO_ASSERT(l.gate_up.n_out == 2 * inter_ && l.gate_up.k_in == hidden_, "gate_up shape");
      PYPTO_ASSERT(l.down.n_out == hidden_ && l.down.k_in == inter_, "down shape");
      continue;
    }
    PYPTO_ASSERT(l.router.n_out == c.num_experts && l.router.k_in == hidden_ && l.router.format == WeightFormat::Float,
                 "router shape");
    PYPTO_ASSERT(!l.experts.empty() && l.expert_first >= 0 && l.expert_first + int64_t(l.experts.size()) <= c.num_experts,
                 "experts [", l.expert_first, ", +", l.experts.size(), ") of ", c.num_experts);
    for (const Qwen3ExpertWeights& x : l.experts) {
      PYPTO_ASSERT(x.gate_up.n_out == 2 * w_.moe_inter && x.gate_up.k_in == hidden_, "expert gate_up shape");
      PYPTO_ASSERT(x.down.n_out == hidden_ && x.down.k_in == w_.moe_inter, "expert down shape");
    }
    if (!moe_)
      moe_ = std::make_unique<MoeBlock>(backend_, hidden_, w_.moe_inter, c.num_experts, c.num_experts_per_tok,
                                        c.norm_topk_prob);
    if (c.shared_expert_intermediate_size > 0) {
      const SharedExpertWeights& se = l.shared_expert;
      const int64_t sI = c.shared_expert_intermediate_size / w_.tp_size;  // this rank's columns
      PYPTO_ASSERT(se.gate_up.n_out == 2 * sI && se.gate_up.k_in == hidden_ && se.down.n_out == hidden_ &&
                       se.down.k_in == sI && se.gate.n_out == 1 && se.gate.k_in == hidden_,
                   "shared expert shape");
      if (!shared_) shared_ = std::make_unique<SharedExpert>(backend_, hidden_, sI);
    }
  }
  if (n_gdn > 0) {
    PYPTO_ASSERT(w_.state_slots >= 1, "GDN layers on rank ", w_.tp_rank, "/", w_.tp_size, " without state slots");
    // Under --tp each rank runs its share of the GDN heads, with their state.
    const ModelConfig rc = gdn_rank_config(c, w_.tp_size);
    gdn_ = std::make_unique<GatedDeltaNet>(backend_, rc, w_.gdn_prefill);
    states_ = GdnStatePool(rc, w_.state_slots, n_gdn, w_.state_snapshots);
    rollback_ = GdnRollbackStates(rc, w_.state_slots, n_gdn, w_.state_rollback);
  }
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
  s.num_layers = std::max<int32_t>(1, n_kv_layers_);  // this stage's (full-attention) layers
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
  if (shared_) shared_->take_scratch(arena_, rows);
  if (gdn_) gdn_->take_scratch(arena_, rows);
  if (w_.config.hybrid()) {
    gate_ = take(q_dim_);
    rot_ = take(int64_t(std::max(w_.n_heads, w_.n_kv_heads)) * std::max<int32_t>(1, w_.config.rotary_dim));
  }
}

void Qwen3Model::begin_hybrid_step(const ForwardBatch& batch) {
  PYPTO_ASSERT(int32_t(batch.state_slots.size()) == batch.num_seqs(), "a hybrid model's batch needs state slots (",
               batch.state_slots.size(), " for ", batch.num_seqs(), " sequences)");
  PYPTO_ASSERT(batch.state_restore.empty() || int32_t(batch.state_restore.size()) == batch.num_seqs(),
               "state_restore size");
  for (const ForwardBatch::StateSave& v : batch.state_saves)
    if (v.entry < 0 || v.entry >= states_.snapshots())
      fail("state snapshot ", v.entry, " is outside the model's ", states_.snapshots(), " snapshot entries");
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int32_t slot = batch.state_slots[size_t(s)];
    if (slot < 0 || slot >= states_.slots())
      fail("state slot ", slot, " is outside the model's pool of ", states_.slots(), " (--max-num-seqs)");
    const int64_t start = batch.context_len[size_t(s)] - (batch.query_start[size_t(s) + 1] - batch.query_start[size_t(s)]);
    if (const int32_t e = batch.state_restore.empty() ? -1 : batch.state_restore[size_t(s)]; e >= 0) {
      // A prefix-cache hit: the sequence resumes from the state saved where its cached prefix ends.
      if (e >= states_.snapshots())
        fail("state snapshot ", e, " is outside the model's ", states_.snapshots(), " snapshot entries");
      if (states_.snapshot_tokens(e) != start)
        fail("hybrid model: a sequence resumes at position ", start, " from state snapshot ", e, ", which covers ",
             states_.snapshot_tokens(e), " tokens");
      states_.restore(slot, e);
    }
    const int32_t drafts = batch.draft_rows.empty() ? 0 : batch.draft_rows[size_t(s)];
    if (drafts > rollback_.depth())
      fail("hybrid model: a sequence verifies ", drafts, " drafts in one step, but the model keeps Gated DeltaNet ",
           "states for rollback at ", rollback_.depth(), " draft positions (num_speculative_tokens at load)");
    // Speculative decoding: the previous step verified drafts and some were rejected, so the
    // sequence continues before the end of its slot's state; the state at the last accepted token
    // was kept (model/gdn_rollback.h). Either way the entries are used up now.
    if (start > 0 && states_.tokens(slot) > start && (batch.state_restore.empty() || batch.state_restore[size_t(s)] < 0))
      rollback_.roll_back(states_, slot, start);
    if (rollback_.depth() > 0) rollback_.forget(slot);
    if (start == 0) {
      states_.reset(slot);
    } else if (states_.tokens(slot) != start) {
      // The Gated DeltaNet state is a function of the whole prefix: a sequence can only continue
      // where its own state ends, or from a snapshot of the state at the end of its cached prefix.
      fail("hybrid model: a sequence continues at position ", start, " but its Gated DeltaNet state (slot ", slot,
           ") covers ", states_.tokens(slot), " tokens; a prefix-cache hit must restore a state snapshot taken ",
           "at that position");
    }
  }
}

void Qwen3Model::end_hybrid_step(const ForwardBatch& batch) {
  for (int32_t s = 0; s < batch.num_seqs(); ++s) states_.set_tokens(batch.state_slots[size_t(s)], batch.context_len[size_t(s)]);
  // Rollback entry j of a sequence verifying d drafts: the state after its first n - d + j rows.
  for (size_t s = 0; s < batch.draft_rows.size(); ++s) {
    const int32_t d = batch.draft_rows[s];
    const int64_t n = batch.query_start[s + 1] - batch.query_start[s];
    for (int32_t j = 0; j < d; ++j)
      rollback_.set_tokens(batch.state_slots[s], j, batch.context_len[s] - n + (n - d + j));
  }
  for (const ForwardBatch::StateSave& v : batch.state_saves) {
    const int64_t n = batch.query_start[size_t(v.seq) + 1] - batch.query_start[size_t(v.seq)];
    states_.set_snapshot_tokens(v.entry, batch.context_len[size_t(v.seq)] - n + v.rows);
  }
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
  PYPTO_ASSERT(cache.num_layers() == std::max<int32_t>(1, n_kv_layers_) && cache.spec().n_kv_heads == w_.n_kv_heads &&
                   cache.spec().head_dim == c.head_dim,
               "KV cache shape does not match the model");
  batch.validate(cache.num_blocks(), cache.block_size());
  for (int64_t t = 0; t < batch.num_tokens(); ++t) {
    const int32_t id = batch.token_ids[t];
    if (id < 0 || id >= c.vocab_size) fail("token id ", id, " is outside the vocabulary [0, ", c.vocab_size, ")");
  }
}

// The attention block of layer i (this stage's index): h_ [T, hidden] → tmp_ added into x_.
// Qwen3 / Qwen2 attention, or Qwen3.5's gated full attention (partial RoPE, output gate).
void Qwen3Model::attention(const Qwen3LayerWeights& L, int32_t i, const ForwardBatch& batch, KvCache& cache, int64_t T) {
  const ModelConfig& c = w_.config;
  Backend& be = backend_;
  const int32_t hd = c.head_dim;
  const float eps = float(c.rms_norm_eps);
  const RopeSpec rope = rope_from_config(c);  // plain or YaRN
  const bool gated = L.mixer == LayerMixer::GatedAttention;
  PYPTO_PROF_OP("attention.qkv_proj");
  be.linear(h_, T, L.qkv, L.qkv_bias, qkv_);                 // qkv [T, q_dim | kv_dim | kv_dim (| q_dim gate)]
  // Split the fused rows into contiguous q [T, nq, hd], k, v [T, nkv, hd]: the per-head ops
  // below take dense [rows, heads, head_dim] arrays.
  PYPTO_PROF_OP("host.qkv_split");
  for (int64_t t = 0; t < T; ++t) {
    const float* row = qkv_ + t * qkv_dim_;
    std::memcpy(q_ + t * q_dim_, row, sizeof(float) * q_dim_);
    std::memcpy(k_ + t * kv_dim_, row + q_dim_, sizeof(float) * kv_dim_);
    std::memcpy(v_ + t * kv_dim_, row + q_dim_ + kv_dim_, sizeof(float) * kv_dim_);
    if (gated) std::memcpy(gate_ + t * q_dim_, row + q_dim_ + 2 * kv_dim_, sizeof(float) * q_dim_);
  }
  PYPTO_PROF_OP("norm.qk");
  if (c.qk_norm) {  // Qwen3: RMSNorm over each head's head_dim values, before RoPE
    be.rms_norm(q_, L.q_norm, T * w_.n_heads, hd, eps, q_);
    be.rms_norm(k_, L.k_norm, T * w_.n_kv_heads, hd, eps, k_);
  }
  PYPTO_PROF_OP("attention.core");  // rope, kv store, paged attention
  if (c.rotary_dim > 0 && c.rotary_dim < hd) {  // Qwen3.5: RoPE on the first rotary_dim dims only
    be.synchronize();
    partial_rope(be, q_, batch.positions.data(), T, w_.n_heads, hd, c.rotary_dim, rope, rot_);
    partial_rope(be, k_, batch.positions.data(), T, w_.n_kv_heads, hd, c.rotary_dim, rope, rot_);
  } else {
    be.rope(q_, batch.positions.data(), T, w_.n_heads, hd, rope);
    be.rope(k_, batch.positions.data(), T, w_.n_kv_heads, hd, rope);
  }
  const KvCacheLayer& kv = cache.layer(kv_layer_[size_t(i)]);  // this stage's full-attention layers only
  be.kv_store(k_, v_, batch.slot_mapping.data(), T, kv);
  be.paged_attention(q_, T, w_.n_heads, kv, batch.attention(), attn_);  // attn [T, nq, hd]
  if (gated) apply_output_gate(be, attn_, gate_, T, q_dim_, q_dim_);  // attn · sigmoid(gate)
  PYPTO_PROF_OP("attention.o_proj");
  be.linear(attn_, T, L.o_proj, nullptr, tmp_);                  // tmp [T, hidden] (partial under TP)
  PYPTO_PROF_OP("residual.add");
  all_reduce(tmp_, T * hidden_);
  be.add_inplace(x_, tmp_, T * hidden_);
}

void Qwen3Model::capture_aux(int32_t layer, int64_t T) {
  const int64_t n = int64_t(aux_layers_.size());
  for (int64_t j = 0; j < n; ++j) {
    if (aux_layers_[size_t(j)] != layer) continue;
    PYPTO_PROF_OP("host.aux_hidden");
    backend_.synchronize();
    for (int64_t t = 0; t < T; ++t)
      std::memcpy(aux_hidden_out_ + (t * n + j) * hidden_, x_ + t * hidden_, sizeof(float) * size_t(hidden_));
    // Back to the forward span's "layers" phase: an op mark stays open until the next mark on the
    // same span, which would count the following layers' time as this copy's too.
    PYPTO_PROF_PHASE(prof::Level::Kernel, "layers");
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
  if (gdn_) begin_hybrid_step(batch);
  Backend& be = backend_;
  const float eps = float(c.rms_norm_eps);

  // x [T, hidden]: the residual stream.
  PYPTO_PROF_OP("embedding");
  if (first_stage()) embed(batch, T);
  else std::memcpy(x_, hidden_in, sizeof(float) * size_t(T * hidden_));  // the previous stage's x

  PYPTO_PROF_PHASE(prof::Level::Kernel, "layers");
  for (int32_t i = 0; i < int32_t(w_.layers.size()); ++i) {
    const int32_t li = w_.layer_begin + i;  // the model's layer index (profiles name it)
    if (aux_hidden_out_ != nullptr) capture_aux(li, T);
    PYPTO_PROF_LAYER(li, "norm.input");
    const Qwen3LayerWeights& L = w_.layers[size_t(i)];
    // --- attention block ---
    be.rms_norm(x_, L.input_norm, T, hidden_, eps, h_);        // h [T, hidden]
    if (L.mixer == LayerMixer::GatedDeltaNet) {  // Qwen3.5 linear attention (no KV cache)
      gdn_->forward(L.gdn, h_, batch, states_, gdn_layer_[size_t(i)], tmp_, &rollback_);  // tmp [T, hidden] (partial under TP)
      PYPTO_PROF_OP("residual.add");
      all_reduce(tmp_, T * hidden_);
      be.add_inplace(x_, tmp_, T * hidden_);
    } else {
      attention(L, i, batch, cache, T);
    }
    // --- MLP block ---
    PYPTO_PROF_OP("norm.post");
    be.rms_norm(x_, L.post_norm, T, hidden_, eps, h_);
    if (L.sparse) {  // Qwen3-MoE: routed experts in place of the dense MLP
      moe_->forward(L, h_, T, tmp_);                 // tmp [T, hidden] (partial under TP / EP)
      if (L.shared_expert.gate_up.n_out > 0) shared_->add(L.shared_expert, h_, T, tmp_);  // Qwen3.5-MoE (partial under TP)
      PYPTO_PROF_OP("residual.add");
      all_reduce(tmp_, T * hidden_);
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

  if (gdn_) end_hybrid_step(batch);

  // Final norm and lm_head only for the rows that need logits: gather them into h [n, hidden].
  // (n is the same on every rank: they run the same batch.)
  if (!last_stage()) {
    be.synchronize();
    std::memcpy(hidden_out, x_, sizeof(float) * size_t(T * hidden_));  // to the next stage
    return;
  }
  if (normed_hidden_out_ != nullptr) {  // MTP drafting reads every row's (set_normed_hidden_out)
    PYPTO_PROF_OP("norm.final_all_rows");
    be.rms_norm(x_, w_.final_norm, T, hidden_, eps, normed_hidden_out_);
    be.synchronize();
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
