#include "parallel/replicas/pipeline_stage.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

#include "core/error.h"
#include "core/profiler.h"

namespace pypto {

std::vector<LayerRange> balance_pipeline_stages(int num_layers, int pp, int64_t layer_bytes, int64_t first_extra,
                                                int64_t last_extra) {
  if (pp < 1 || pp > num_layers)
    fail("--pp ", pp, ": the model has ", num_layers, " decoder layers (num_hidden_layers) and every pipeline stage "
         "needs at least one; use --pp between 1 and ", num_layers);
  const int n = num_layers;
  auto cost = [&](int b, int e) {  // stage holding layers [b, e)
    return int64_t(e - b) * layer_bytes + (b == 0 ? first_extra : 0) + (e == n ? last_extra : 0);
  };
  // best[k][e]: the smallest largest-stage cost of layers [0, e) in k stages; from[k][e]: its
  // last stage's first layer. O(pp · n²) with n ≤ a few hundred layers.
  constexpr int64_t kInf = std::numeric_limits<int64_t>::max();
  std::vector<std::vector<int64_t>> best(size_t(pp + 1), std::vector<int64_t>(size_t(n + 1), kInf));
  std::vector<std::vector<int>> from(size_t(pp + 1), std::vector<int>(size_t(n + 1), -1));
  best[0][0] = 0;
  for (int k = 1; k <= pp; ++k)
    for (int e = k; e <= n; ++e)
      for (int b = k - 1; b < e; ++b) {
        if (best[size_t(k - 1)][size_t(b)] == kInf) continue;
        const int64_t c = std::max(best[size_t(k - 1)][size_t(b)], cost(b, e));
        if (c < best[size_t(k)][size_t(e)]) {
          best[size_t(k)][size_t(e)] = c;
          from[size_t(k)][size_t(e)] = b;
        }
      }
  std::vector<LayerRange> stages(static_cast<size_t>(pp));
  for (int k = pp, e = n; k >= 1; --k) {
    const int b = from[size_t(k)][size_t(e)];
    stages[size_t(k - 1)] = {b, e};
    e = b;
  }
  return stages;
}

std::vector<LayerRange> plan_pipeline_stages(const Checkpoint& ck, const Backend& stager, int tp, int pp,
                                             const StagedFormats* formats) {
  const int n = ck.config().num_hidden_layers;
  if (pp == 1) return {LayerRange{0, n}};
  if (pp < 1 || pp > n) return balance_pipeline_stages(n, pp, 0, 0, 0);  // the error naming --pp
  // One layer's bytes, and what the first / last layer's stage holds besides its layer.
  const LayerRange all{0, n};
  const int64_t layer = int64_t(staged_slab_bytes(ck, stager, 0, tp, 1, formats, all)) -
                        int64_t(staged_slab_bytes(ck, stager, 0, tp, 0, formats, all));
  const int64_t first = int64_t(staged_slab_bytes(ck, stager, 0, tp, -1, formats, {0, 1}));
  const int64_t last = int64_t(staged_slab_bytes(ck, stager, 0, tp, -1, formats, {n - 1, n}));
  return balance_pipeline_stages(n, pp, layer, std::max<int64_t>(0, first - layer), std::max<int64_t>(0, last - layer));
}

void split_micro_batches(const ForwardBatch& b, int m, std::vector<ForwardBatch>& out) {
  const int32_t S = b.num_seqs();
  const int64_t T = b.num_tokens();
  m = std::max(1, std::min<int>(m, S));
  for (size_t r = 1; r < b.logits_indices.size(); ++r)
    if (b.logits_indices[r] < b.logits_indices[r - 1]) m = 1;  // rows out of order: keep them together
  out.resize(size_t(m));
  size_t li = 0;  // next logits row
  int32_t s0 = 0;
  for (int k = 0; k < m; ++k) {
    int32_t s1 = S;
    if (k < m - 1) {  // end nearest to k+1 m-ths of the tokens, leaving a sequence for each later part
      const int64_t target = T * (k + 1) / m;
      auto off = [&](int32_t s) { return std::llabs(int64_t(b.query_start[size_t(s)]) - target); };
      s1 = s0 + 1;
      while (s1 < S - (m - 1 - k) && off(s1 + 1) < off(s1)) ++s1;
    }
    ForwardBatch& p = out[size_t(k)];
    p.clear();
    const int32_t q0 = b.query_start[size_t(s0)], q1 = b.query_start[size_t(s1)];
    p.token_ids.assign(b.token_ids.begin() + q0, b.token_ids.begin() + q1);
    p.positions.assign(b.positions.begin() + q0, b.positions.begin() + q1);
    p.slot_mapping.assign(b.slot_mapping.begin() + q0, b.slot_mapping.begin() + q1);
    for (int32_t s = s0; s <= s1; ++s) p.query_start.push_back(b.query_start[size_t(s)] - q0);
    p.context_len.assign(b.context_len.begin() + s0, b.context_len.begin() + s1);
    p.max_blocks_per_seq = b.max_blocks_per_seq;
    const int64_t mb = b.max_blocks_per_seq;
    p.block_tables.assign(b.block_tables.begin() + s0 * mb, b.block_tables.begin() + s1 * mb);
    for (; li < b.logits_indices.size() && b.logits_indices[li] < q1; ++li)
      p.logits_indices.push_back(b.logits_indices[li] - q0);
    // Hybrids: the part's sequences' state slots, restores and saves (sequence indices rebased).
    if (!b.state_slots.empty()) p.state_slots.assign(b.state_slots.begin() + s0, b.state_slots.begin() + s1);
    if (!b.state_restore.empty()) p.state_restore.assign(b.state_restore.begin() + s0, b.state_restore.begin() + s1);
    for (const ForwardBatch::StateSave& sv : b.state_saves)
      if (sv.seq >= s0 && sv.seq < s1) p.state_saves.push_back({sv.seq - s0, sv.rows, sv.entry});
    if (!b.draft_rows.empty()) p.draft_rows.assign(b.draft_rows.begin() + s0, b.draft_rows.begin() + s1);
    s0 = s1;
  }
  PYPTO_ASSERT(li == b.logits_indices.size(), "logits rows left after the split");
}

PipelineStage::PipelineStage(Qwen3Model& model, KvCache& cache, Communicator* world, StagePosition pos,
                             MicroBatchPolicy micro)
    : model_(model), cache_(cache), world_(world), pos_(pos), micro_(micro) {
  micro_.max_parts = std::max(1, micro_.max_parts);
  PYPTO_ASSERT(pos_.pp == 1 || (world_ && world_->size() == pos_.pp * pos_.tp && world_->rank() == pos_.rank()),
               "pipeline rank ", pos_.rank(), " of ", pos_.pp, " x ", pos_.tp, " without a matching communicator");
  PYPTO_ASSERT(model_.first_stage() == pos_.first() && model_.last_stage() == pos_.last(), "stage ", pos_.stage,
               " of ", pos_.pp, " holds the wrong layers");
}

void PipelineStage::run(const ForwardBatch& batch, float* logits_out) {
  if (batch.num_tokens() == 0) return;
  const bool capture = capture_ != nullptr && pos_.last();
  if (capture) capture_->resize(size_t(batch.num_tokens() * model_.hidden_size()));
  struct Uncapture {  // the model never keeps the pointers past this step
    Qwen3Model& m;
    ~Uncapture() {
      m.set_normed_hidden_out(nullptr);
      m.set_aux_hidden_out({}, nullptr);
    }
  } uncapture{model_};
  const int64_t aux_width = aux_out_ ? int64_t(aux_layers_.size()) * model_.hidden_size() : 0;  // floats per row
  if (pos_.pp == 1) {
    if (capture) model_.set_normed_hidden_out(capture_->data());
    if (aux_out_) model_.set_aux_hidden_out(aux_layers_, aux_out_);
    model_.forward(batch, cache_, logits_out);
    return;
  }
  model_.check_batch(batch, cache_);  // every rank throws here, before anything is sent
  split_micro_batches(batch, micro_.parts(batch.num_tokens()), parts_);
  // V: floats per output row, the vocabulary or a pooling head's width (model/pooling_head.h).
  const int64_t H = model_.hidden_size(), V = model_.output_width(), n = batch.num_logits();
  const int prev = pos_.rank() - pos_.tp, next = pos_.rank() + pos_.tp;  // same TP index, stage ∓ 1
  const bool keeps_logits = pos_.last() && pos_.tp_rank == Qwen3Model::kLogitsRank;
  if (keeps_logits) logits_.resize(size_t(n * V));
  int64_t row = 0;     // the micro-batch's first logits row in the step's logits
  int64_t token0 = 0;  // its first token row in the step's (micro-batches are contiguous, in order)
  for (const ForwardBatch& mb : parts_) {
    const int64_t T = mb.num_tokens();
    const size_t bytes = sizeof(float) * size_t(T * H);
    if (!pos_.first()) {
      PYPTO_PROF_OP("pipeline.recv");
      hidden_in_.resize(size_t(T * H));
      world_->recv(hidden_in_.data(), int64_t(bytes), prev);
    }
    if (!pos_.last()) hidden_out_.resize(size_t(T * H));
    if (capture) model_.set_normed_hidden_out(capture_->data() + token0 * H);
    if (aux_out_) model_.set_aux_hidden_out(aux_layers_, aux_out_ + token0 * aux_width);
    model_.forward_stage(mb, cache_, pos_.first() ? nullptr : hidden_in_.data(),
                         pos_.last() ? nullptr : hidden_out_.data(), keeps_logits ? logits_.data() + row * V : nullptr);
    if (!pos_.last()) {
      PYPTO_PROF_OP("pipeline.send");
      world_->send(hidden_out_.data(), int64_t(bytes), next);
    }
    row += mb.num_logits();
    token0 += T;
  }
  // The step's logits go back to the engine's rank once, after the last micro-batch: a message
  // against the flow of the hidden states inside the loop could deadlock with synchronous sends.
  if (n == 0) return;
  const int last_rank0 = (pos_.pp - 1) * pos_.tp;
  if (keeps_logits) world_->send(logits_.data(), int64_t(sizeof(float) * size_t(n * V)), 0);
  if (pos_.rank() == 0) world_->recv(logits_out, int64_t(sizeof(float) * size_t(n * V)), last_rank0);
}

}  // namespace pypto
