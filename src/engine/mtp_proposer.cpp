#include "engine/mtp_proposer.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/log.h"
#include "core/profiler.h"
#include "engine/request.h"
#include "sampling/philox.h"
#include "sampling/rejection_sampler.h"
#include "sampling/sampler.h"

namespace pypto {

MtpProposer::MtpProposer(const Qwen3Weights& target, Backend& backend, int64_t num_blocks, int32_t block_size,
                         DType kv_dtype)
    : MtpProposer({Rank{&target, &backend, nullptr}}, nullptr, num_blocks, block_size, kv_dtype) {}

MtpProposer::MtpProposer(std::vector<Rank> ranks, Fanout fanout, int64_t num_blocks, int32_t block_size,
                         DType kv_dtype)
    : H_(ranks.at(0).target->config.hidden_size),
      V_(ranks.at(0).target->config.vocab_size),
      C_(H_),
      fanout_(std::move(fanout)),
      block_size_(block_size),
      num_blocks_(num_blocks) {
  set_target_kv_blocks(num_blocks);  // until the scheduler says: no private blocks
  PYPTO_ASSERT(num_blocks > 0 && num_blocks < (int64_t(1) << 31), "MTP KV blocks: ", num_blocks);
  PYPTO_ASSERT(ranks.size() == 1 || fanout_, "a tensor-parallel MTP head needs its ranks' fan-out");
  for (const Rank& r : ranks) {
    PYPTO_ASSERT(r.target->tp_size == int(ranks.size()) && r.target->tp_rank == int(heads_.size()), "MTP rank ",
                 heads_.size(), " holds the slice of rank ", r.target->tp_rank, "/", r.target->tp_size);
    heads_.push_back(std::make_unique<MtpHead>(*r.target, r.embed ? *r.embed : *r.target, *r.backend, r.comm));
    caches_.push_back(std::make_unique<KvCache>(heads_.back()->kv_cache_spec(num_blocks, block_size, kv_dtype)));
  }
}

MtpProposer::MtpProposer(const ModelConfig& config, RemotePass pass, int64_t num_blocks, int32_t block_size)
    : H_(config.hidden_size),
      V_(config.vocab_size),
      C_(H_),
      remote_(std::move(pass)),
      block_size_(block_size),
      num_blocks_(num_blocks) {
  PYPTO_ASSERT(num_blocks > 0 && num_blocks < (int64_t(1) << 31), "MTP KV blocks: ", num_blocks);
  PYPTO_ASSERT(remote_, "a remote MTP head needs its pass");
  set_target_kv_blocks(num_blocks);
}

void MtpProposer::set_fuse(int64_t width, Fuse fuse) {
  PYPTO_ASSERT(width > 0 && fuse && states_.empty(), "the drafter's fused rows (width ", width,
               "), set before any request");
  C_ = width;
  fuse_ = std::move(fuse);
}

const std::vector<float>& MtpProposer::pass_hidden() {
  if (!fuse_) return rows_hidden_;
  const int64_t n = int64_t(captured_.size()) / C_;
  rows_hidden_.resize(size_t(n * H_));
  if (n > 0) fuse_(captured_.data(), n, rows_hidden_.data());
  return rows_hidden_;
}

void MtpProposer::propose(std::span<const int32_t>, int32_t, std::vector<int32_t>& out) const {
  out.clear();  // unreachable through the scheduler, which calls propose_for()
}

void MtpProposer::set_target_kv_blocks(int64_t num_blocks) {
  PYPTO_ASSERT(num_blocks > 0 && num_blocks <= num_blocks_ && states_.empty(), "the target's ", num_blocks,
               " KV blocks in an MTP pool of ", num_blocks_, ", set before any request");
  target_blocks_ = num_blocks;
  free_.clear();
  for (int64_t b = num_blocks_ - 1; b >= num_blocks; --b) free_.push_back(int32_t(b));  // lowest ids first out
  tag_.assign(size_t(num_blocks), -1);
  last_written_.assign(size_t(num_blocks), -1);
  first_token_.assign(size_t(num_blocks), -1);
}

int32_t MtpProposer::row_block(const State& st, int64_t t) const {
  // MTP position m = t - base lives in block table entry base / bs + m / bs: for base 0 the
  // target's block of t; after a restart an entry at or before it (never a tagged or hit block:
  // a restart happens past every verified row).
  const size_t e = size_t(st.base / block_size_ + (t - st.base) / block_size_);
  PYPTO_ASSERT(e < st.table.size(), "MTP row ", t, " outside its block table");
  return st.table[e];
}

bool MtpProposer::kept_covers(const State& st, int64_t from, int64_t to) const {
  return from >= to || (st.hidden_start >= 0 && st.hidden_start <= from &&
                        to <= st.hidden_start + int64_t(st.hidden.size()) / C_);
}

void MtpProposer::wrote_row(const State& st, int64_t t, int32_t next_token) {
  const int32_t b = row_block(st, t);
  if (b >= target_blocks_) return;  // private lookahead
  PYPTO_ASSERT(tag_[size_t(b)] < 0, "MTP row ", t, " written into shared block ", b);
  if (st.base == 0 && (t + 1) % block_size_ == 0) last_written_[size_t(b)] = next_token;
}

bool MtpProposer::lookahead(State& st, int64_t last, std::vector<int32_t>& taken) {
  const size_t need = size_t(st.base / block_size_ + (last - st.base) / block_size_ + 1);
  if (need <= st.table.size()) return true;
  if (need - st.table.size() > free_.size()) {
    if (!warned_short_)
      log_warn("speculative decoding: the MTP head's private lookahead blocks (", free_.size(), " free) are short; ",
               "requests decode without drafts until blocks free up (logged once)");
    warned_short_ = true;
    return false;
  }
  while (st.table.size() < need) {
    st.table.push_back(free_.back());
    taken.push_back(free_.back());
    free_.pop_back();
  }
  return true;
}

void MtpProposer::restore(State& st, const ScheduledRequest& s) {
  const int64_t start = s.num_computed_tokens;
  if (start <= 0 || start % block_size_ != 0 || s.token_ids.empty()) return;
  ++context_stats_.hits;
  const size_t kh = size_t(start / block_size_);
  if (st.table.size() < kh) return;
  for (size_t j = 0; j < kh; ++j) {
    const int32_t b = st.table[j], nb = j + 1 < kh ? st.table[j + 1] : -1;
    if (b >= target_blocks_ || (nb >= target_blocks_)) return;
    const int32_t next = nb >= 0 ? first_token_[size_t(nb)] : s.token_ids[0];  // x_{(j+1) bs}
    if (tag_[size_t(b)] < 0 || tag_[size_t(b)] != next) return;
  }
  st.base = 0;
  st.valid = start;
  st.prepared = start;  // rows < start are verified: the first step computes rows from start on
  st.tagged = kh;
  ++context_stats_.restored;
  context_stats_.restored_rows += start;
}

void MtpProposer::tag(State& st) {
  if (st.base != 0) return;
  while (st.tagged < st.table.size() && int64_t(st.tagged + 1) * block_size_ <= st.valid) {
    const int32_t b = st.table[st.tagged];
    if (st.tagged >= st.own_first && b < target_blocks_) tag_[size_t(b)] = last_written_[size_t(b)];
    ++st.tagged;
  }
}

void MtpProposer::forget(const std::string& req_id) { states_.erase(req_id); }

void MtpProposer::finish(const Request& req) {
  auto it = states_.find(req.request_id);
  if (it != states_.end()) {
    State& st = it->second;
    // Rows < num_computed - 1 pair verified tokens; row num_computed - 1 waits for a token the
    // target never computed (or held a rejected draft).
    if (st.prepared != req.num_computed_tokens)
      st.valid = std::clamp<int64_t>(st.valid, 0, std::max<int64_t>(0, req.num_computed_tokens - 1 - st.base));
    else
      st.valid = std::clamp<int64_t>(st.valid, 0, std::max<int64_t>(0, req.num_computed_tokens - st.base));
    tag(st);
  }
  forget(req.request_id);
}

int64_t MtpProposer::context_start(const std::string& req_id) const {
  auto it = states_.find(req_id);
  return it == states_.end() ? -1 : it->second.base;
}

// As DraftModelProposer chooses: the request's history as the target's row j will see it
// (output + drafts[0..j)); greedy requests take the argmax, sampled ones draw from q (Philox
// stream kDraftStream), which rejection sampling needs.
int32_t MtpProposer::choose(const Request& req, State& st, std::span<float> logits) {
  std::vector<int32_t> history(req.output_token_ids);
  history.insert(history.end(), st.drafts.begin(), st.drafts.end());
  const SamplerRow row{&req.sampling_params, req.prompt_token_ids, history, req.eos_token_ids, req.seed, {}};
  if (req.sampling_params.is_greedy()) return sample_row(logits, row).token_id;
  std::vector<float> q;
  sampling_distribution(logits, row, q);
  const int32_t x = draw_from_weights(q, philox_uniform(req.seed, kDraftStream | uint64_t(history.size())));
  st.dist.vocab = int64_t(q.size());
  st.dist.probs.insert(st.dist.probs.end(), q.begin(), q.end());
  return x;
}

void MtpProposer::run(const std::vector<float>& hidden_rows) {
  logits_.resize(size_t(batch_.num_logits() * V_));
  out_.resize(size_t(batch_.num_tokens() * H_));
  if (batch_.num_tokens() == 0) return;
  if (remote_) {
    remote_(batch_, hidden_rows, logits_, out_);
    return;
  }
  // Rank 0 (Qwen3Model::kLogitsRank) receives the logits and outputs; the others' are not written.
  auto rank = [&](int r) {
    heads_[size_t(r)]->forward(batch_, hidden_rows.data(), *caches_[size_t(r)], r == 0 ? logits_.data() : nullptr,
                               r == 0 ? out_.data() : nullptr);
  };
  if (heads_.size() == 1) rank(0);
  else fanout_(rank);
}

void MtpProposer::run_kv(const std::vector<float>& hidden_rows) {
  PYPTO_ASSERT(batch_.num_logits() == 0, "a KV-only pass asks for no logits");
  if (batch_.num_tokens() == 0) return;
  if (remote_) {  // rank processes, virtual engines and EAGLE-3 heads write the KV only too (RemotePass)
    run(hidden_rows);
    return;
  }
  auto rank = [&](int r) { heads_[size_t(r)]->store_kv(batch_, hidden_rows.data(), *caches_[size_t(r)]); };
  if (heads_.size() == 1) rank(0);
  else fanout_(rank);
}

void MtpProposer::observe(const SchedulerOutput& so, const ForwardBatch& batch, const float* hidden) {
  PYPTO_PROF_SPAN(prof::Level::E2E, "draft", "host.draft", -1, "op");  // profiling: the head's rows (drafting layer)
  PYPTO_ASSERT(batch.num_seqs() == int32_t(so.scheduled.size()), "one sequence per scheduled request");
  batch_.clear();
  gathered().clear();
  int32_t max_blocks = 1;
  std::vector<std::pair<State*, int64_t>> advanced;  // state, its valid rows after this pass
  // Blocks first (max_blocks_per_seq must be known before the first add_sequence).
  struct Rows {
    State* st;
    size_t seq;
    int64_t first, end;  // MTP rows for target positions [first, end)
  };
  std::vector<Rows> plan;
  // Per scheduled request: the first target position whose hidden row is kept past this step
  // (-1: only the step's own rows). Kept rows of all requests stay within kept_limit_bytes_.
  std::vector<int64_t> keep_from(so.scheduled.size(), -1);
  int64_t kept_bytes = 0;
  for (const auto& [id, st] : states_) kept_bytes += int64_t(st.hidden.size() * sizeof(float));
  for (size_t i = 0; i < so.scheduled.size(); ++i) {
    const ScheduledRequest& s = so.scheduled[i];
    const int64_t start = s.num_computed_tokens, n = s.num_scheduled_tokens;
    auto it = states_.find(s.req_id);
    if (s.is_new && it != states_.end()) {  // resumed (preempted earlier): a fresh MTP context
      forget(s.req_id);
      it = states_.end();
    }
    State& st = it != states_.end() ? it->second : states_[s.req_id];
    // The request's target block table as the scheduler allocated it (the batch's may be shifted
    // by an executor that places several engines' blocks in one pool: --pp-virtual-engines).
    if (s.is_new) st.table = s.block_ids;
    else st.table.insert(st.table.end(), s.block_ids.begin(), s.block_ids.end());
    if (int64_t(st.table.size()) * block_size_ < start + n) {  // a step this proposer never saw
      states_.erase(s.req_id);  // no table to write into: the request drafts no more (a fresh admission would)
      continue;
    }
    // Blocks allocated this step hold nothing of anyone's MTP context any more.
    const size_t fresh_from = s.is_new ? size_t(start / block_size_) : 0;
    for (size_t j = fresh_from; j < s.block_ids.size(); ++j)
      if (const int32_t b = s.block_ids[j]; b >= 0 && b < target_blocks_)
        tag_[size_t(b)] = last_written_[size_t(b)] = first_token_[size_t(b)] = -1;
    for (int64_t q = start; q < start + n; ++q)
      if (q % block_size_ == 0 && size_t(q / block_size_) < st.table.size())
        if (const int32_t b = st.table[size_t(q / block_size_)]; b < target_blocks_)
          first_token_[size_t(b)] = s.token_ids[size_t(q - start)];  // a draft's is replaced once verified
    if (it == states_.end()) {
      st.base = start;
      st.own_first = size_t((start + block_size_ - 1) / block_size_);
      st.tagged = st.own_first;
      if (s.is_new && restore_on_hit_) restore(st, s);
    }
    // Rows past start - 2 may hold rejected drafts, so row start - 1 is recomputed with x_start,
    // unless prepare() just computed it from the verified token (then rows < start are verified).
    const int64_t verified_rows = st.prepared == start ? start - st.base : start - 1 - st.base;
    st.prepared = -1;
    st.valid = std::clamp<int64_t>(st.valid, 0, std::max<int64_t>(0, verified_rows));
    tag(st);
    int64_t first = st.base + st.valid;
    if (first < start && !kept_covers(st, first, start)) {
      // A gap the kept rows cannot fill (no h_t for them): the MTP context restarts here.
      st.base = kept_covers(st, start - 1, start) ? start - 1 : start;
      st.valid = 0;
      first = st.base;
    }
    const int64_t end = start + n - 1;  // row t needs x_{t+1}: the step's tokens reach start + n - 1
    if (!context_needed_ && s.num_draft_tokens == 0) {
      // Speculation is off this step: no MTP rows (the step costs a plain one); the hidden rows
      // [first, start + n) are kept instead, and the rows are filled in one pass when the context
      // is needed again (here or in prepare()). Beyond the kept-rows budget the context restarts.
      const int64_t after = kept_bytes - int64_t(st.hidden.size() * sizeof(float)) +
                            (start + n - first) * C_ * int64_t(sizeof(float));
      if (after <= kept_limit_bytes_) {
        keep_from[i] = first;
        kept_bytes = after;
      } else {
        st.valid = 0;
        st.base = std::max(end, first);
        ++context_stats_.restarts;
      }
    } else if (end > first) {
      plan.push_back({&st, i, first, end});
      max_blocks = std::max(max_blocks, int32_t(st.table.size()));
    }
  }
  batch_.max_blocks_per_seq = max_blocks;
  std::vector<int32_t> ids;
  for (const Rows& r : plan) {
    const ScheduledRequest& s = so.scheduled[r.seq];
    const int64_t start = s.num_computed_tokens;
    const int64_t q0 = batch.query_start[r.seq];
    ids.clear();
    for (int64_t t = r.first; t < r.end; ++t) {
      // x_{t+1}: the step's token, or one kept over a stretch without context.
      ids.push_back(t + 1 >= start ? s.token_ids[size_t(t + 1 - start)]
                                   : r.st->kept_tokens[size_t(t + 1 - r.st->hidden_start)]);
      context_stats_.filled_rows += t < start - 1;
      wrote_row(*r.st, t, ids.back());
      const float* h = t >= start ? hidden + (q0 + t - start) * C_
                                  : r.st->hidden.data() + (t - r.st->hidden_start) * C_;  // h_{start-1}: kept
      gathered().insert(gathered().end(), h, h + C_);
    }
    const size_t off = size_t(r.st->base / block_size_);
    batch_.add_sequence(ids.data(), int32_t(ids.size()), int32_t(r.first - r.st->base), r.st->table.data() + off,
                        int32_t(r.st->table.size() - off), block_size_, ForwardBatch::Logits::None);
    advanced.push_back({r.st, r.end - r.st->base});
  }
  try {
    run_kv(pass_hidden());  // no pass reads these rows' outputs: prepare() computes row p - 1 afresh
  } catch (...) {
    for (const Rows& r : plan) r.st->valid = 0, r.st->base = r.end;  // KV written or not: start over
    throw;
  }
  for (auto& [st, valid] : advanced) st->valid = valid;
  // Keep each request's rows for the next step (its last row, or the last accepted one).
  for (size_t i = 0; i < so.scheduled.size(); ++i) {
    const ScheduledRequest& s = so.scheduled[i];
    auto found = states_.find(s.req_id);
    if (found == states_.end()) continue;
    State& st = found->second;
    const int64_t q0 = batch.query_start[i], n = batch.query_start[i + 1] - q0, start = s.num_computed_tokens;
    const auto step_tokens = s.token_ids.begin();
    if (keep_from[i] >= 0 && keep_from[i] < start) {  // the rows [keep_from, start) kept earlier, then the step's
      const int64_t cut = start - st.hidden_start, drop = keep_from[i] - st.hidden_start;
      st.hidden.erase(st.hidden.begin() + cut * C_, st.hidden.end());
      st.hidden.erase(st.hidden.begin(), st.hidden.begin() + drop * C_);
      st.hidden.insert(st.hidden.end(), hidden + q0 * C_, hidden + (q0 + n) * C_);
      st.kept_tokens.resize(size_t(cut));
      st.kept_tokens.erase(st.kept_tokens.begin(), st.kept_tokens.begin() + drop);
      st.kept_tokens.insert(st.kept_tokens.end(), step_tokens, step_tokens + n);
      st.hidden_start = keep_from[i];
    } else {
      st.hidden.assign(hidden + q0 * C_, hidden + (q0 + n) * C_);
      st.kept_tokens.assign(step_tokens, step_tokens + n);
      st.hidden_start = start;
    }
  }
}

void MtpProposer::prepare(std::span<const Query> queries) {
  for (auto& [id, st] : states_) {  // last step's proposals are spent
    st.drafts.clear();
    st.dist = {};
  }
  struct Job {
    const Request* req;
    State* st;
    int32_t k;
    int64_t p;      // verified tokens computed by the target; the token at p is the newest
    int64_t first;  // pass 0 computes rows [first, p - 1]: the rows missed while speculation was off, then p - 1
  };
  std::vector<Job> jobs;
  int32_t max_blocks = 1, max_k = 0;
  // Private lookahead blocks lent for this prepare(), and each table's target entries to cut back to.
  std::vector<int32_t> taken;
  std::vector<std::pair<State*, size_t>> target_entries;
  auto give_back = [&] {
    for (auto& [st, n] : target_entries) st->table.resize(n);
    free_.insert(free_.end(), taken.rbegin(), taken.rend());
  };
  for (const Query& q : queries) {
    if (q.k <= 0) continue;
    const Request& r = *q.request;
    auto it = states_.find(r.request_id);
    if (it == states_.end()) continue;
    State& st = it->second;
    const int64_t p = r.num_computed_tokens;
    PYPTO_ASSERT(r.num_tokens() == p + 1, "request ", r.request_id, " drafts with ", r.num_tokens() - p, " new tokens");
    if (!(st.hidden_start >= 0 && st.hidden_start <= p - 1 && p - 1 < st.hidden_start + int64_t(st.hidden.size()) / C_))
      continue;  // the target's row p - 1 was not seen (cannot happen after a step that computed it)
    // Rollback: MTP rows from p - 1 on held drafts (or are recomputed now).
    st.valid = std::clamp<int64_t>(st.valid, 0, std::max<int64_t>(0, p - 1 - st.base));
    if (!kept_covers(st, st.base + st.valid, p)) {  // a gap the kept rows cannot fill: restart at p - 1
      st.base = p - 1;
      st.valid = 0;
    }
    target_entries.push_back({&st, st.table.size()});
    if (!lookahead(st, p - 2 + q.k, taken)) continue;
    jobs.push_back({&r, &st, q.k, p, st.base + st.valid});
    max_blocks = std::max(max_blocks, int32_t(st.table.size() - size_t(st.base / block_size_)));
    max_k = std::max(max_k, q.k);
  }
  if (jobs.empty()) {
    give_back();
    return;
  }
  const size_t V = size_t(V_);
  try {
    // The rows missed while speculation was off, [first, p - 2] of each job: their KV only (no
    // pass reads their outputs), before pass 0 computes row p - 1 attending to them.
    batch_.clear();
    batch_.max_blocks_per_seq = max_blocks;
    gathered().clear();
    rows_hidden_.clear();
    std::vector<int32_t> fill;
    for (Job& j : jobs) {
      State& st = *j.st;
      if (j.first >= j.p - 1) continue;
      fill.clear();
      for (int64_t t = j.first; t < j.p - 1; ++t) fill.push_back(j.req->all_token_ids[size_t(t + 1)]);
      context_stats_.filled_rows += int64_t(fill.size());
      const float* h = st.hidden.data() + (j.first - st.hidden_start) * C_;
      gathered().insert(gathered().end(), h, h + int64_t(fill.size()) * C_);
      for (size_t e = 0; e < fill.size(); ++e) wrote_row(st, j.first + int64_t(e), fill[e]);
      const size_t off = size_t(st.base / block_size_);
      batch_.add_sequence(fill.data(), int32_t(fill.size()), int32_t(j.first - st.base), st.table.data() + off,
                          int32_t(st.table.size() - off), block_size_, ForwardBatch::Logits::None);
    }
    if (batch_.num_tokens() > 0) run_kv(pass_hidden());
    for (int32_t d = 0; d < max_k; ++d) {
      // Pass d: row (h_{p-1}, x_p) at p - 1 for d = 0, else (the previous row's output, draft d-1).
      batch_.clear();
      batch_.max_blocks_per_seq = max_blocks;
      gathered().clear();
      rows_hidden_.clear();
      std::vector<Job*> rows;
      std::vector<int64_t> last_row;  // per sequence: its last row in the pass (out_)
      std::vector<int32_t> toks;
      for (Job& j : jobs) {
        if (j.k <= d) continue;
        State& st = *j.st;
        // Pass 0: row p - 1, (h_{p-1}, x_p) from the kept hidden rows (the rows before it filled
        // above); pass d > 0: one row at p - 1 + d.
        const int64_t t0 = j.p - 1 + d;
        toks.clear();
        if (d == 0) {
          toks.push_back(j.req->all_token_ids[size_t(j.p)]);
          const float* h = st.hidden.data() + (t0 - st.hidden_start) * C_;
          gathered().insert(gathered().end(), h, h + C_);
        } else {
          toks.push_back(st.drafts[size_t(d - 1)]);
          rows_hidden_.insert(rows_hidden_.end(), st.out.begin(), st.out.end());
        }
        for (size_t e = 0; e < toks.size(); ++e) wrote_row(st, t0 + int64_t(e), toks[e]);
        const size_t off = size_t(st.base / block_size_);
        batch_.add_sequence(toks.data(), int32_t(toks.size()), int32_t(t0 - st.base), st.table.data() + off,
                            int32_t(st.table.size() - off), block_size_, ForwardBatch::Logits::Last);
        last_row.push_back(batch_.num_tokens() - 1);
        rows.push_back(&j);
      }
      run(d == 0 ? pass_hidden() : rows_hidden_);  // pass 0 reads captured rows, the others the head's outputs
      for (size_t r = 0; r < rows.size(); ++r) {
        State& st = *rows[r]->st;
        if (d == 0) {  // rows up to p - 1 are verified: (h_{p-1}, x_p)
          st.valid = rows[r]->p - st.base;
          st.prepared = rows[r]->p;
          tag(st);
        }
        st.out.assign(out_.begin() + last_row[r] * H_, out_.begin() + (last_row[r] + 1) * H_);
        st.drafts.push_back(choose(*rows[r]->req, st, std::span<float>(logits_.data() + r * V, V)));
      }
    }
  } catch (...) {
    for (const Job& j : jobs) {  // which KV got written is unknown: these contexts restart
      j.st->valid = 0;
      j.st->base = j.p;  // past row p - 1, which may be verified (and its block tagged) already
      j.st->prepared = -1;
      j.st->drafts.clear();
      j.st->dist = {};
    }
    give_back();
    throw;
  }
  give_back();
}

void MtpProposer::propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) {
  out.clear();
  auto it = states_.find(req.request_id);
  if (it == states_.end()) return;
  const std::vector<int32_t>& d = it->second.drafts;
  out.assign(d.begin(), d.begin() + std::min<ptrdiff_t>(k, ptrdiff_t(d.size())));
}

const DraftDistribution* MtpProposer::distribution(const std::string& req_id) const {
  auto it = states_.find(req_id);
  return it == states_.end() || it->second.dist.empty() ? nullptr : &it->second.dist;
}

}  // namespace pypto
