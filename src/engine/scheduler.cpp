#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <unordered_map>

#include "core/error.h"
#include "core/log.h"
#include "core/profiler.h"
#include "engine/ngram_proposer.h"

namespace pypto {

Scheduler::Scheduler(const SchedulerConfig& config, const CacheConfig& cache, BlockHasher hasher)
    : config_(config), kv_(cache.num_blocks, cache.block_size, cache.enable_prefix_caching, std::move(hasher)) {
  config_.validate();
  cache.validate();
  if (cache.recurrent_state) kv_.enable_state_snapshots(cache.state_snapshots, cache.snapshot_interval_tokens());
  const SpeculativeConfig& spec = config_.speculative;
  if (spec.method == SpeculativeMethod::Ngram)
    proposer_ = std::make_shared<NgramProposer>(spec.prompt_lookup_min, spec.prompt_lookup_max);
  if (spec.enabled()) cost_ = SpecCostModel(spec.num_speculative_tokens, spec.cost_model);
  // A draft model is loaded above the engine and handed over with set_drafter() (the Engine
  // refuses to start without it).
}

void Scheduler::set_drafter(std::shared_ptr<DraftProposer> drafter) {
  PYPTO_ASSERT(drafter != nullptr && requests_.empty() && config_.speculative.stateful_drafter(),
               "a drafter is set once, before any request, for method draft_model, mtp or eagle3");
  proposer_ = std::move(drafter);
  proposer_->set_target_kv_blocks(kv_.block_pool().num_blocks());
}

int64_t Scheduler::draft_cap(const Request& req) const {
  if (!proposer_ || !req.speculate || req.pooling || req.num_tokens() - req.num_computed_tokens != 1) return 0;
  // Accepting a drafts appends a + 1 tokens, so a <= max_tokens - output - 1 keeps the request
  // within max_tokens, and (prompt + max_tokens <= max_model_len, see check_request) within
  // max_model_len and the KV blocks add_request checked it could have.
  const int64_t room = req.sampling_params.max_tokens - req.num_output_tokens() - 1;
  return std::max<int64_t>(0, std::min(int64_t(req.spec_throttle.peek_k()), room));
}

int64_t Scheduler::draft_limit(Request& req, bool consume) const {
  if (!proposer_ || !req.speculate || req.num_tokens() - req.num_computed_tokens != 1) return 0;
  const int64_t room = req.sampling_params.max_tokens - req.num_output_tokens() - 1;
  const int32_t k = std::min(req.spec_step_k, consume ? req.spec_throttle.next_k() : req.spec_throttle.peek_k());
  return std::max<int64_t>(0, std::min(int64_t(k), room));
}

void Scheduler::choose_step_k() {
  last_context_ = step_context_;
  std::vector<SpecCostModel::Candidate> candidates;
  std::vector<Request*> decoding;
  const double prior = cost_.global_alpha();
  for (Request* req : running_) {
    req->spec_step_k = 0;
    if (req->num_tokens() - req->num_computed_tokens == 1 && !req->pooling) {
      candidates.push_back({req->spec_acceptance.alpha(prior), int32_t(draft_cap(*req))});
      decoding.push_back(req);
    }
  }
  step_batch_ = int32_t(candidates.size());
  const std::vector<int32_t> ks = cost_.choose(candidates);  // each request's own k
  for (size_t i = 0; i < decoding.size(); ++i) decoding[i]->spec_step_k = ks[i];
  step_context_ = cost_.context_needed();
  proposer_->set_context_needed(step_context_);
}

void Scheduler::observe_step_seconds(const SchedulerOutput& so, double seconds) {
  if (!proposer_ || so.scheduled.empty()) return;
  int64_t drafts = 0;
  for (const ScheduledRequest& s : so.scheduled) {
    if (!s.samples || s.is_new || s.num_scheduled_tokens - s.num_draft_tokens != 1) return;  // not only decodes
    drafts += s.num_draft_tokens;
  }
  // A plain step of a drafter with context (MTP rows inside the step) is not what plain decoding
  // costs: only those without it measure the plain cost.
  const bool stateless = config_.speculative.method == SpeculativeMethod::Ngram;
  if (drafts == 0 && step_context_ && !stateless) return;
  // The verify cost follows the step's rows: 1 + drafts / batch per request on average.
  const int32_t batch = int32_t(so.scheduled.size());
  cost_.observe_step(batch, 1.0 + double(drafts) / double(batch), seconds);
}

void Scheduler::check_request(const std::string& id, int64_t prompt, int64_t max_tokens) const {
  if (prompt == 0) fail("request ", id, ": the prompt is empty");
  if (max_tokens == 0 && prompt > config_.max_model_len)  // a pooling request: the prompt alone
    fail("request ", id, ": input of ", prompt, " tokens exceeds --max-model-len ", config_.max_model_len);
  if (prompt + max_tokens > config_.max_model_len)
    fail("request ", id, ": prompt of ", prompt, " tokens + max_tokens ", max_tokens, " = ", prompt + max_tokens,
         " tokens exceeds --max-model-len ", config_.max_model_len);
  // The last sampled token is never fed back, so at most prompt + max_tokens - 1 positions need KV
  // (a pooling request, max_tokens 0, computes all of its prompt).
  const int64_t blocks = kv_.blocks_for_tokens(max_tokens == 0 ? prompt : prompt + max_tokens - 1);
  const int64_t pool = kv_.block_pool().num_blocks();
  if (blocks > pool)
    fail("request ", id, ": prompt of ", prompt, " tokens + max_tokens ", max_tokens, " needs ", blocks,
         " KV blocks of ", kv_.block_size(), " tokens, but the KV cache has only ", pool, " blocks (",
         pool * kv_.block_size(), " tokens)");
}

void Scheduler::add_request(std::unique_ptr<Request> req) {
  PYPTO_ASSERT(req != nullptr);
  const std::string& id = req->request_id;
  check_request(id, req->num_prompt_tokens(), req->sampling_params.max_tokens);
  if (requests_.contains(id)) fail("request ", id, ": a request with this id is already running");
  req->status = RequestStatus::Waiting;
  req->spec_throttle = SpecThrottle(proposer_ && req->speculate ? config_.speculative.num_speculative_tokens : 0);
  Request* raw = req.get();
  requests_.emplace(id, std::move(req));
  waiting_.push_back(raw);
}

int64_t Scheduler::cap_new_tokens(int64_t gap, int64_t budget) const {
  int64_t n = gap;
  if (config_.enable_chunked_prefill) n = std::min(n, config_.long_prefill_token_threshold);
  return std::min(n, budget);
}

void Scheduler::propose_drafts(Request& req, int64_t max_drafts, std::vector<int32_t>& drafts) {
  drafts.clear();
  const int64_t k = std::min(draft_limit(req, /*consume=*/true), max_drafts);
  if (k <= 0) return;
  PYPTO_PROF_SPAN(prof::Level::E2E, "draft", "host.draft", -1, "op");  // profiling: the report's drafting layer
  proposer_->propose_for(req, int32_t(k), drafts);
  if (draft_filter_ && !drafts.empty()) drafts.resize(std::min(drafts.size(), draft_filter_(req, drafts)));
}

void Scheduler::preempt(Request* req, SchedulerOutput& out) {
  // Recompute-style: the KV is dropped (its full blocks stay in the prefix cache until evicted,
  // so the recompute often starts from a hit) and the request restarts from its tokens so far.
  kv_.free(*req);
  if (proposer_) proposer_->finish(*req);  // a draft model's KV goes too; it catches up later
  prefill_.forget(req->request_id);
  req->status = RequestStatus::Preempted;
  req->num_computed_tokens = 0;
  ++req->num_preemptions;
  ++num_preemptions_;
  waiting_.push_front(req);
  out.preempted_req_ids.push_back(req->request_id);
}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  out.finished_req_ids = std::move(finished_since_last_step_);
  finished_since_last_step_.clear();
  kv_.end_state_step();  // after a failed step, which never reached update_from_output
  int64_t budget = config_.max_num_batched_tokens;

  // n counts the drafts (the last drafts.size() tokens scheduled).
  auto emit = [&](Request* req, int64_t n, bool is_new, std::vector<int32_t> block_ids,
                  std::span<const int32_t> drafts = {}) {
    ScheduledRequest s;
    s.req_id = req->request_id;
    s.num_computed_tokens = req->num_computed_tokens;
    s.num_scheduled_tokens = n;
    const int64_t verified = n - int64_t(drafts.size());
    s.token_ids.assign(req->all_token_ids.begin() + req->num_computed_tokens,
                       req->all_token_ids.begin() + req->num_computed_tokens + verified);
    s.token_ids.insert(s.token_ids.end(), drafts.begin(), drafts.end());
    s.num_draft_tokens = int64_t(drafts.size());
    s.is_new = is_new;
    s.block_ids = std::move(block_ids);
    s.samples = req->num_computed_tokens + verified == req->num_tokens();
    // Saves may fall on drafts; update_from_output commits only those at verified positions.
    s.state_saves = kv_.plan_state_saves(*req, req->num_computed_tokens, n);
    out.total_num_scheduled_tokens += n;
    budget -= n;
    out.scheduled.push_back(std::move(s));
  };

  // 1. Running requests, oldest first. A drafter with a model drafts for all of them at once
  // first (each request's own limit; the budget may cut its drafts below).
  if (proposer_) {
    choose_step_k();
    std::vector<DraftProposer::Query> queries;
    int32_t passes = 0;
    for (Request* req : running_)
      if (const int64_t k = draft_limit(*req, /*consume=*/false); k > 0) {
        queries.push_back({req, int32_t(k)});
        passes = std::max(passes, int32_t(k));
      }
    // A drafter that fails (its model's forward threw) costs this step its drafts, never the
    // step: the target decodes as without speculation, and the failure is logged.
    const auto t0 = std::chrono::steady_clock::now();
    try {
      PYPTO_PROF_SPAN(prof::Level::E2E, "draft", "host.draft", -1, "op");  // profiling: the drafter's passes
      proposer_->prepare(queries);
      // Drafting after a step without context also catches the context up: not a drafting cost.
      if (passes > 0 && last_context_)
        cost_.observe_drafting(step_batch_, passes,
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    } catch (const std::exception& e) {
      log_error("speculative decoding: the drafter failed, this step decodes without drafts: ", e.what());
    }
  }
  std::vector<int32_t> drafts;
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Request* req = running_[i];
    const int64_t gap = req->num_tokens() - req->num_computed_tokens;
    // Drafts use only budget left after one token for this and each later running request.
    propose_drafts(*req, budget - int64_t(running_.size() - i), drafts);
    const int64_t n = cap_new_tokens(gap + int64_t(drafts.size()), budget);
    if (n - gap < int64_t(drafts.size())) drafts.resize(size_t(std::max<int64_t>(0, n - gap)));
    if (n <= 0) {
      ++i;
      continue;
    }
    std::optional<std::vector<int32_t>> new_blocks;
    bool preempted_self = false;
    while (!(new_blocks = kv_.allocate_slots(*req, n))) {
      // Out of blocks: the newest running request gives its blocks back. It comes after `req`
      // in running_, so it has not been scheduled this step.
      Request* victim = running_.back();
      running_.pop_back();
      preempt(victim, out);
      if (victim == req) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;
    emit(req, n, false, std::move(*new_blocks), drafts);
    ++i;
  }

  // 2. Waiting requests, FIFO. Not after a preemption: the pool is full, admitting more would
  // only preempt again next step. The sequences of one n > 1 request take at most three quarters
  // of the max_num_seqs running slots, so requests that arrive after it find a free slot instead
  // of queueing behind its siblings for whole rounds of their outputs (bench fairness, n = 64 on
  // 16 slots: the others' TTFT went from 0.1 s to 49 s). Skipped siblings keep their places.
  const size_t group_cap = std::max<size_t>(1, size_t(config_.max_num_seqs) - size_t(config_.max_num_seqs) / 4);
  std::unordered_map<std::string, size_t> group_running;
  for (const Request* r : running_)
    if (!r->group_id.empty()) ++group_running[r->group_id];
  for (auto it = waiting_.begin(); out.preempted_req_ids.empty() && it != waiting_.end() && budget > 0 &&
                                   running_.size() < size_t(config_.max_num_seqs);) {
    Request* req = *it;
    if (!req->group_id.empty() && group_running[req->group_id] >= group_cap) {
      ++it;
      continue;
    }
    ComputedBlocks hit = kv_.get_computed_blocks(*req);
    const int64_t gap = req->num_tokens() - hit.num_computed_tokens;
    // Without chunking a request is admitted only when its whole remainder fits this step.
    if (!config_.enable_chunked_prefill && gap > budget) break;
    const int64_t n = cap_new_tokens(gap, budget);
    std::optional<std::vector<int32_t>> new_blocks = kv_.allocate_slots(*req, n, &hit);
    // No room now: running requests will free blocks as they finish (every request fits the
    // pool on its own, see add_request), so waiting here cannot stall forever.
    if (!new_blocks) break;
    it = waiting_.erase(it);
    if (!req->num_cached_tokens) {
      req->num_cached_tokens = hit.num_computed_tokens;
      kv_.record_prefix_cache_query(req->num_tokens(), hit.num_computed_tokens);
    }
    req->num_computed_tokens = hit.num_computed_tokens;
    req->status = RequestStatus::Running;
    running_.push_back(req);
    if (!req->group_id.empty()) ++group_running[req->group_id];
    if (hit.state_entry >= 0) kv_.restore_state(*req, hit);  // before emit plans this step's saves
    emit(req, n, true, kv_.block_ids(req->request_id));
    out.scheduled.back().state_restore = hit.state_entry;
  }
  prefill_drafts(out);
  return out;
}

void Scheduler::prefill_drafts(const SchedulerOutput& out) {
  if (!proposer_) return;
  std::vector<DraftProposer::Chunk> chunks;
  for (const ScheduledRequest& s : out.scheduled) {
    const Request* req = requests_.at(s.req_id).get();
    const int64_t end = s.num_computed_tokens + s.num_scheduled_tokens;
    // Prompt (or recompute) chunks of requests that will draft; a decode's one token is
    // prepare()'s to catch up, and only if the request drafts then.
    const bool decode = s.num_scheduled_tokens == 1 && end == req->num_tokens();
    if (s.num_draft_tokens > 0 || decode || req->pooling || !req->speculate || req->spec_throttle.peek_k() == 0 ||
        !step_context_ ||
        req->sampling_params.max_tokens - req->num_output_tokens() < 2)
      continue;
    chunks.push_back({req, end});
  }
  if (chunks.empty()) return;
  try {
    PYPTO_PROF_SPAN(prof::Level::E2E, "draft", "host.draft", -1, "op");  // profiling: the drafter's prefill
    proposer_->prefill(chunks);
  } catch (const std::exception& e) {
    log_error("speculative decoding: the drafter failed to prefill, its requests catch up when they draft: ", e.what());
  }
}

std::optional<RequestStatus> Scheduler::check_stop(const Request& req) const {
  const SamplingParams& p = req.sampling_params;
  const int32_t last = req.output_token_ids.back();
  if (req.num_output_tokens() >= p.min_tokens) {
    if (std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), last) != p.stop_token_ids.end())
      return RequestStatus::FinishedStopped;
    if (!p.ignore_eos && std::find(req.eos_token_ids.begin(), req.eos_token_ids.end(), last) != req.eos_token_ids.end())
      return RequestStatus::FinishedStopped;
  }
  if (req.num_output_tokens() >= p.max_tokens || req.num_tokens() >= config_.max_model_len)
    return RequestStatus::FinishedLength;
  return std::nullopt;
}

std::vector<EngineCoreOutput> Scheduler::update_from_output(const SchedulerOutput& output,
                                                            std::span<const SampledToken> sampled) {
  PYPTO_ASSERT(sampled.size() == output.scheduled.size(), "sampled ", sampled.size(), " rows for ",
               output.scheduled.size(), " scheduled requests");
  std::vector<std::vector<SampledToken>> runs(sampled.size());
  for (size_t i = 0; i < sampled.size(); ++i)
    if (output.scheduled[i].samples) runs[i].push_back(sampled[i]);
  return update_from_output(output, runs);
}

std::vector<EngineCoreOutput> Scheduler::update_from_output(const SchedulerOutput& output,
                                                            std::span<const std::vector<SampledToken>> runs) {
  PYPTO_ASSERT(runs.size() == output.scheduled.size(), "verified runs for ", runs.size(), " rows, ",
               output.scheduled.size(), " scheduled requests");
  std::vector<EngineCoreOutput> outs;
  for (size_t i = 0; i < output.scheduled.size(); ++i) {
    const ScheduledRequest& s = output.scheduled[i];
    auto it = requests_.find(s.req_id);
    if (it == requests_.end()) continue;  // finished (aborted) since it was scheduled
    Request* req = it->second.get();
    if (req->status != RequestStatus::Running) continue;  // preempted later in the same step
    PYPTO_ASSERT(req->num_computed_tokens == s.num_computed_tokens, "request ", s.req_id, " computed ",
                 req->num_computed_tokens, " tokens but was scheduled from ", s.num_computed_tokens);
    const std::vector<SampledToken>& run = runs[i];
    PYPTO_ASSERT(!s.samples || req->pooling || (!run.empty() && int64_t(run.size()) <= 1 + s.num_draft_tokens),
                 "request ", s.req_id, ": a run of ", run.size(), " tokens for ", s.num_draft_tokens, " drafts");
    // The KV of the last verified token and of the accepted drafts is now valid; that of the
    // rejected drafts lies beyond num_computed_tokens and will be overwritten.
    const int64_t accepted = s.num_draft_tokens > 0 ? int64_t(run.size()) - 1 : 0;
    req->num_computed_tokens += s.num_scheduled_tokens - s.num_draft_tokens + accepted;
    prefill_.on_step(*req, s.num_computed_tokens);
    if (s.num_draft_tokens > 0) {
      spec_stats_.observe(s.num_draft_tokens, accepted);
      req->spec_throttle.observe(int32_t(s.num_draft_tokens), int32_t(accepted));
      req->spec_acceptance.observe(int32_t(s.num_draft_tokens), int32_t(accepted));
      cost_.observe_acceptance(int32_t(s.num_draft_tokens), int32_t(accepted));
    }
    if (!s.samples) {
      kv_.cache_blocks(*req);
      kv_.commit_state_saves(*req, s.state_saves);  // the snapshots ride on the blocks just published
      continue;
    }
    if (req->pooling) {  // prefill done: the step's row is its result; its blocks are freed now
      kv_.cache_blocks(*req);
      EngineCoreOutput o;
      o.req_id = req->request_id;
      o.finish_reason = FinishReason::Stop;
      o.num_prompt_tokens = req->num_prompt_tokens();
      o.num_cached_tokens = req->num_cached_tokens.value_or(0);
      retire(req, RequestStatus::FinishedStopped);
      outs.push_back(std::move(o));
      continue;
    }

    EngineCoreOutput o;
    o.req_id = req->request_id;
    o.num_prompt_tokens = req->num_prompt_tokens();
    o.num_cached_tokens = req->num_cached_tokens.value_or(0);
    o.num_draft_tokens = int32_t(s.num_draft_tokens);
    o.num_accepted_draft_tokens = int32_t(accepted);
    std::optional<RequestStatus> st;
    for (const SampledToken& tok : run) {
      req->append_output_token(tok.token_id);
      if (req->sampling_params.logprobs) req->output_logprobs.push_back(tok);
      o.new_token_ids.push_back(tok.token_id);
      if (req->sampling_params.logprobs) o.new_logprobs.push_back(tok);
      if ((st = check_stop(*req))) {
        if (*st == RequestStatus::FinishedStopped) o.stop_token_id = tok.token_id;
        break;
      }
    }
    // A stop inside an accepted run leaves KV of drafts after it: the computed tokens end with
    // the sequence.
    req->num_computed_tokens = std::min(req->num_computed_tokens, req->num_tokens());
    // Blocks are published once the tokens they hold are in all_token_ids (block hashes cover
    // only appended tokens), and only up to num_computed_tokens: verified tokens alone.
    kv_.cache_blocks(*req);
    // Snapshots taken at rejected drafts (past num_computed_tokens) are never committed: the step's
    // end frees them. The prefix cache holds verified tokens and states only.
    std::vector<StateSave> saves;
    for (const StateSave& v : s.state_saves)
      if (v.position <= req->num_computed_tokens) saves.push_back(v);
    kv_.commit_state_saves(*req, saves);
    if (st) {
      o.finish_reason = finish_reason(*st);
      retire(req, *st);
    }
    outs.push_back(std::move(o));
  }
  kv_.end_state_step();
  return outs;
}

void Scheduler::retire(Request* req, RequestStatus status) {
  kv_.free(*req);
  if (proposer_) proposer_->finish(*req);
  prefill_.forget(req->request_id);
  auto r = std::find(running_.begin(), running_.end(), req);
  if (r != running_.end()) running_.erase(r);
  auto w = std::find(waiting_.begin(), waiting_.end(), req);
  if (w != waiting_.end()) waiting_.erase(w);
  const std::string id = req->request_id;  // a copy: erasing destroys req
  finished_since_last_step_.push_back(id);
  req->status = status;
  requests_.erase(id);
}

void Scheduler::finish_requests(std::span<const std::string> req_ids, RequestStatus status) {
  PYPTO_ASSERT(is_finished(status), "finish_requests with status ", request_status_name(status));
  for (const std::string& id : req_ids) {
    auto it = requests_.find(id);
    if (it != requests_.end()) retire(it->second.get(), status);
  }
}

int64_t Scheduler::num_pending_tokens() const {
  int64_t n = 0;
  for (const auto& [id, r] : requests_)
    n += std::max<int64_t>(0, r->num_prompt_tokens() - r->num_computed_tokens) +
         (r->sampling_params.max_tokens - r->num_output_tokens());
  return n;
}

const Request* Scheduler::get_request(const std::string& req_id) const {
  auto it = requests_.find(req_id);
  return it == requests_.end() ? nullptr : it->second.get();
}

}  // namespace pypto
