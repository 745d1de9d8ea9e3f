#include "engine/draft_model_proposer.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"
#include "engine/request.h"
#include "sampling/philox.h"
#include "sampling/rejection_sampler.h"
#include "sampling/sampler.h"

namespace pypto {

DraftModelProposer::DraftModelProposer(std::shared_ptr<const Qwen3Weights> weights, Backend& backend,
                                       int64_t num_blocks, int32_t block_size, DType kv_dtype,
                                       int64_t max_pass_tokens, bool prefix_caching)
    : weights_(std::move(weights)),
      model_(std::make_unique<Qwen3Model>(*weights_, backend)),
      cache_(model_->kv_cache_spec(num_blocks, block_size, kv_dtype)),
      block_size_(block_size),
      max_pass_tokens_(std::max<int64_t>(1, max_pass_tokens)),
      kv_(num_blocks, block_size, prefix_caching) {}

void DraftModelProposer::propose(std::span<const int32_t>, int32_t, std::vector<int32_t>& out) const {
  out.clear();  // unreachable through the scheduler, which calls propose_for()
}

void DraftModelProposer::sync(const Request& req, State& st, size_t limit) {
  const std::vector<int32_t>& t = req.all_token_ids;
  limit = std::min(limit, t.size());
  if (st.seq.blocks.empty()) {
    // Never the last token: its row gives draft 0, so prepare() computes it anyway.
    const int64_t hit = kv_.restore(st.seq, t, int64_t(std::min(limit, t.size() - 1)), req.block_hashes);
    st.cached.assign(t.begin(), t.begin() + hit);
    if (hit > 0)
      log_debug("speculative decoding: request ", req.request_id, ": the draft restored ", hit, " of ", t.size(),
                " tokens from its prefix cache");
  }
  // Position c holds verified token st.map.token(c) (past a skipped span, a later one).
  auto holds_verified = [&](size_t c) {
    const size_t i = size_t(st.map.token(int64_t(c)));
    return i < limit && st.cached[c] == t[i];
  };
  size_t c = 0;
  while (c < st.cached.size() && holds_verified(c)) ++c;
  if (int64_t(c) < kv_.cached_tokens(st.seq)) {
    // The rollback would write into cached blocks, which other requests may read: start over
    // from the cache instead (cached blocks hold verified tokens only, so this does not happen
    // while the target's verified tokens only grow).
    reset(st);
    sync(req, st, limit);
    return;
  }
  st.cached.resize(c);
  st.map.truncate(int64_t(c));
}

void DraftModelProposer::publish(const Request& req, State& st, size_t limit) {
  // Past a skipped span positions are not token indices: nothing there is published.
  kv_.publish(st.seq, st.cached, req.all_token_ids, std::min(int64_t(limit), st.map.gap_at), req.block_hashes);
}

void DraftModelProposer::reset(State& st) {
  kv_.release(st.seq);
  st.cached.clear();
  st.map = {};
}

void DraftModelProposer::forget(const std::string& req_id) {
  auto it = states_.find(req_id);
  if (it == states_.end()) return;
  kv_.release(it->second.seq);
  states_.erase(it);
}

void DraftModelProposer::finish(const Request& req) {
  auto it = states_.find(req.request_id);
  if (it == states_.end()) return;
  // Nothing is written for this request any more: every verified full block may go in.
  publish(req, it->second, req.all_token_ids.size());
  forget(req.request_id);
}

void DraftModelProposer::forward() {
  logits_.resize(size_t(batch_.num_logits() * model_->vocab_size()));
  if (batch_.num_tokens() == 0) return;
  auto pass = [this] { model_->forward(batch_, cache_, logits_.data()); };
  if (run_on_)
    run_on_(pass);
  else
    pass();
}

int32_t DraftModelProposer::choose(const Request& req, State& st, std::optional<structured::GrammarMatcher>& grammar,
                                   std::span<float> logits) {
  // The request's history as the target's row j will see it: output + drafts[0..j).
  std::vector<int32_t> history(req.output_token_ids);
  history.insert(history.end(), st.drafts.begin(), st.drafts.end());
  SamplerRow row{&req.sampling_params, req.prompt_token_ids, history, req.eos_token_ids, req.seed, {}};
  if (grammar)
    if (const structured::TokenMask* mask = grammar->next_mask()) row.allowed_tokens = *mask;
  // The grammar follows the drafts (a draft outside it would break the copy: later masks then
  // allow EOS only, and the verify rejects that draft anyway).
  auto follow = [&grammar](int32_t x) {
    if (grammar) grammar->accept(x);
    return x;
  };
  if (req.sampling_params.is_greedy()) return follow(sample_row(logits, row).token_id);
  std::vector<float> q;
  sampling_distribution(logits, row, q);
  const int32_t x = follow(draw_from_weights(q, philox_uniform(req.seed, kDraftStream | uint64_t(history.size()))));
  st.dist.vocab = int64_t(q.size());
  st.dist.probs.insert(st.dist.probs.end(), q.begin(), q.end());
  return x;
}

void DraftModelProposer::prepare(std::span<const Query> queries) {
  std::vector<Job> jobs;
  for (auto& [id, st] : states_) {  // last step's proposals are spent
    st.drafts.clear();
    st.dist = {};
  }
  for (const Query& q : queries) {
    if (q.k <= 0) continue;
    const Request& r = *q.request;
    State& st = states_[r.request_id];
    st.drafts.clear();
    st.dist = {};
    const std::vector<int32_t>& t = r.all_token_ids;
    PYPTO_ASSERT(!t.empty());
    // Publish the full blocks of what the draft holds that the target has verified since (last
    // step's accepted drafts, the tokens before them; never its rejected drafts), then roll back:
    // keep the longest prefix of what the draft holds that is still verified (at most all but
    // the last token, whose row gives draft 0); KV past it gets overwritten.
    publish(r, st, t.size() - 1);
    sync(r, st, t.size() - 1);
    // A long catch-up (after a stretch without drafting) feeds only the last tokens; once a draft
    // made after the skip is accepted, the skipped span is computed after all.
    const bool accepted = st.drafted_at >= 0 && st.drafted_at < int64_t(t.size()) &&
                          t[size_t(st.drafted_at)] == st.first_draft;
    st.drafted_at = -1;
    if (accepted && st.map.gapped()) {
      st.cached.resize(size_t(st.map.gap_at));
      st.map = {};
      ++filled_gaps_;
    } else {
      const int64_t before = st.map.skipped;
      st.map.bound(st.cached, int64_t(t.size()), max_catch_up_);
      skipped_tokens_ += std::max<int64_t>(0, st.map.skipped - before);
    }
    // KV for the verified tokens and drafts 0 .. k-2 (the last draft is never fed).
    if (!kv_.reserve(st.seq, st.map.position(int64_t(t.size())) + q.k - 1)) {
      if (!warned_short_)
        log_warn("speculative decoding: the draft model's KV pool (", kv_.free_blocks(),
                 " free blocks) cannot hold request ",
                 r.request_id, "'s ", t.size(), " tokens; it decodes without drafts until blocks free up "
                 "(logged once)");
      warned_short_ = true;
      continue;
    }
    jobs.push_back({&r, &st, q.k, {}});
    if (r.grammar) jobs.back().grammar.emplace(*r.grammar);
  }
  if (jobs.empty()) return;
  try {
    run_passes(jobs);
  } catch (...) {
    // Which KV got written is unknown: these requests start over (a full catch-up) next time.
    for (const Job& j : jobs) {
      reset(*j.st);
      j.st->drafts.clear();
      j.st->dist = {};
    }
    throw;
  }
}

void DraftModelProposer::run_passes(std::span<Job> jobs) {
  int32_t max_blocks = 0;
  for (const Job& j : jobs) max_blocks = std::max(max_blocks, int32_t(j.st->seq.ids.size()));

  // Pass 0: every request's catch-up tokens, in passes of at most max_pass_tokens_ rows.
  std::vector<size_t> pending(jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) pending[i] = i;
  std::vector<size_t> rows;  // job of each logits row
  int64_t caught_up = 0;
  while (!pending.empty()) {
    batch_.clear();
    batch_.max_blocks_per_seq = max_blocks;
    rows.clear();
    int64_t budget = max_pass_tokens_;
    std::vector<size_t> still;
    for (size_t i : pending) {
      State& st = *jobs[i].st;
      const std::vector<int32_t>& t = jobs[i].req->all_token_ids;
      // Draft position `start` takes verified token `from` (later than start past a skipped span).
      const int64_t start = int64_t(st.cached.size()), from = st.map.token(start);
      const int64_t remaining = int64_t(t.size()) - from;
      const int64_t n = std::min(remaining, budget);
      if (n <= 0) {
        still.push_back(i);
        continue;
      }
      batch_.add_sequence(t.data() + from, int32_t(n), int32_t(start), st.seq.ids.data(), int32_t(st.seq.ids.size()),
                          block_size_, n == remaining ? ForwardBatch::Logits::Last : ForwardBatch::Logits::None);
      st.cached.insert(st.cached.end(), t.begin() + from, t.begin() + from + n);
      budget -= n;
      caught_up += n;
      if (n == remaining) rows.push_back(i);
      else still.push_back(i);
    }
    forward();
    const size_t V = size_t(model_->vocab_size());
    for (size_t r = 0; r < rows.size(); ++r) {
      Job& j = jobs[rows[r]];
      j.st->drafts.push_back(choose(*j.req, *j.st, j.grammar, std::span<float>(logits_.data() + r * V, V)));
    }
    pending = std::move(still);
  }
  catch_up_tokens_ += caught_up;
  for (const Job& j : jobs)
    if (!j.st->drafts.empty()) {
      j.st->drafted_at = int64_t(j.req->all_token_ids.size());
      j.st->first_draft = j.st->drafts.front();
    }
  max_step_catch_up_tokens_ = std::max(max_step_catch_up_tokens_, caught_up);

  // Passes 1 .. k-1: one row per request still drafting, fed its previous draft.
  int32_t max_k = 0;
  for (const Job& j : jobs) max_k = std::max(max_k, j.k);
  for (int32_t d = 1; d < max_k; ++d) {
    batch_.clear();
    batch_.max_blocks_per_seq = max_blocks;
    rows.clear();
    for (size_t i = 0; i < jobs.size(); ++i) {
      if (jobs[i].k <= d) continue;
      State& st = *jobs[i].st;
      const int32_t pos = int32_t(st.map.position(int64_t(jobs[i].req->all_token_ids.size()))) + d - 1;
      PYPTO_ASSERT(int64_t(st.cached.size()) == pos && int64_t(st.drafts.size()) == d);
      batch_.add_sequence(&st.drafts[size_t(d - 1)], 1, pos, st.seq.ids.data(), int32_t(st.seq.ids.size()), block_size_,
                          ForwardBatch::Logits::Last);
      st.cached.push_back(st.drafts[size_t(d - 1)]);
      rows.push_back(i);
    }
    forward();
    const size_t V = size_t(model_->vocab_size());
    for (size_t r = 0; r < rows.size(); ++r) {
      Job& j = jobs[rows[r]];
      j.st->drafts.push_back(choose(*j.req, *j.st, j.grammar, std::span<float>(logits_.data() + r * V, V)));
    }
  }
}

void DraftModelProposer::propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) {
  out.clear();
  auto it = states_.find(req.request_id);
  if (it == states_.end()) return;
  const std::vector<int32_t>& d = it->second.drafts;
  out.assign(d.begin(), d.begin() + std::min<ptrdiff_t>(k, ptrdiff_t(d.size())));
}

const DraftDistribution* DraftModelProposer::distribution(const std::string& req_id) const {
  auto it = states_.find(req_id);
  return it == states_.end() || it->second.dist.empty() ? nullptr : &it->second.dist;
}

}  // namespace pypto

namespace pypto {

void DraftModelProposer::prefill(std::span<const Chunk> chunks) {
  struct Work {
    const Request* req;
    State* st;
    int64_t end;
  };
  std::vector<Work> work;
  int32_t max_blocks = 0;
  for (const Chunk& c : chunks) {
    const std::vector<int32_t>& t = c.request->all_token_ids;
    PYPTO_ASSERT(c.end > 0 && c.end <= int64_t(t.size()), "request ", c.request->request_id, ": chunk end ", c.end,
                 " of ", t.size(), " tokens");
    State& st = states_[c.request->request_id];
    // Rollback as in prepare(): keep what the draft holds of tokens [0, end), after restoring
    // what the draft's prefix cache has of them.
    sync(*c.request, st, size_t(c.end));
    if (st.map.gapped()) {  // chunks compute every token: the tail after a skipped span goes
      st.cached.resize(size_t(st.map.gap_at));
      st.map = {};
    }
    // A short pool leaves the rest to prepare(), which warns.
    if (int64_t(st.cached.size()) >= c.end || !kv_.reserve(st.seq, c.end)) continue;
    work.push_back({c.request, &st, c.end});
    max_blocks = std::max(max_blocks, int32_t(st.seq.ids.size()));
  }
  try {
    // KV only (no logits rows), in passes of at most max_pass_tokens_ rows.
    for (bool more = !work.empty(); more;) {
      batch_.clear();
      batch_.max_blocks_per_seq = max_blocks;
      int64_t budget = max_pass_tokens_;
      more = false;
      for (Work& w : work) {
        const std::vector<int32_t>& t = w.req->all_token_ids;
        const int64_t start = int64_t(w.st->cached.size());
        const int64_t n = std::min(w.end - start, budget);
        if (n <= 0) {
          more |= start < w.end;
          continue;
        }
        batch_.add_sequence(t.data() + start, int32_t(n), int32_t(start), w.st->seq.ids.data(),
                            int32_t(w.st->seq.ids.size()), block_size_, ForwardBatch::Logits::None);
        w.st->cached.insert(w.st->cached.end(), t.begin() + start, t.begin() + start + n);
        budget -= n;
        prefill_tokens_ += n;
        more |= start + n < w.end;
      }
      forward();
    }
  } catch (...) {
    for (Work& w : work) reset(*w.st);  // unknown KV: a full catch-up next time
    throw;
  }
  // The prompt's full blocks (but the last token's) are verified: later requests may hit them.
  for (Work& w : work) publish(*w.req, *w.st, w.req->all_token_ids.size() - 1);
}

}  // namespace pypto
