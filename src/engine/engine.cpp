#include "engine/engine.h"

#include "core/profiler.h"
#include "engine/engine_trace.h"
#include "engine/spec_grammar.h"
#include "engine/spec_verify.h"
#include "sampling/rejection_sampler.h"

#include <chrono>
#include <exception>
#include <future>

#include "core/error.h"
#include "core/log.h"

namespace pypto {

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Joins a request id and a sequence index into the scheduler's id for that sequence.
constexpr char kSequenceSeparator = '\x1f';

RequestStatus status_for(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return RequestStatus::FinishedStopped;
    case FinishReason::Length: return RequestStatus::FinishedLength;
    case FinishReason::Abort: return RequestStatus::FinishedAborted;
    case FinishReason::Error: return RequestStatus::FinishedError;
  }
  return RequestStatus::FinishedError;
}

}  // namespace

Engine::Engine(const EngineConfig& config, std::unique_ptr<ModelExecutor> executor)
    : config_(config),
      executor_(std::move(executor)),
      scheduler_(config.scheduler, config.cache),
      seed_source_(std::random_device{}()) {
  PYPTO_ASSERT(executor_ != nullptr);
  if (config_.vocab_size < 1) fail("engine: vocab_size must be >= 1, got ", config_.vocab_size);
  if (const SpeculativeMethod m = config_.scheduler.speculative.method; config_.scheduler.speculative.stateful_drafter()) {
    if (!config_.drafter)
      fail("--speculative-config: method ", speculative_method_name(m), ", but no drafter was loaded for this engine");
    scheduler_.set_drafter(config_.drafter);
  }
  // A constrained request's drafts end at the first one its grammar forbids (engine/spec_grammar.h).
  scheduler_.set_draft_filter([this](const Request& r, std::span<const int32_t> drafts) {
    const auto& m = sequences_.at(r.request_id).matcher;
    return m ? grammar_draft_limit(*m, drafts) : drafts.size();
  });
}

void Engine::validate_request(const EngineRequest& req) const {
  if (req.request_id.empty()) fail("request id is empty");
  if (req.grammar && req.grammar->vocab().size() != config_.vocab_size)
    fail("request ", req.request_id, ": its grammar was compiled for a vocabulary of ", req.grammar->vocab().size(),
         " tokens, the model has ", config_.vocab_size);
  if (req.pooling != (config_.pooled_width > 0))
    fail("request ", req.request_id, ": ",
         req.pooling ? "a pooling (embedding / score) request, but this engine generates (--runner generate)"
                     : "a generate request, but this engine serves a pooling model (--runner pooling)");
  if (!req.pooling) req.params.validate(config_.vocab_size);
  if (req.pooling && req.params.n != 1) fail("request ", req.request_id, ": a pooling request has n 1, got ", req.params.n);
  for (size_t i = 0; i < req.prompt_token_ids.size(); ++i) {
    const int32_t t = req.prompt_token_ids[i];
    if (t < 0 || t >= config_.vocab_size)
      fail("request ", req.request_id, ": prompt token ", i, " = ", t, " is outside the vocabulary [0, ",
           config_.vocab_size, ")");
  }
  scheduler_.check_request(req.request_id, int64_t(req.prompt_token_ids.size()), req.pooling ? 0 : req.params.max_tokens);
}

void Engine::add_request(const EngineRequest& req) {
  validate_request(req);
  if (parents_.contains(req.request_id)) fail("request ", req.request_id, ": a request with this id is already running");
  const int32_t n = req.params.n;
  const Clock::time_point arrival = req.arrival_time.value_or(Clock::now());
  Parent parent;
  parent.num_unfinished = n;
  for (int32_t k = 0; k < n; ++k) {
    const std::string seq_id = n == 1 ? req.request_id : str_cat(req.request_id, kSequenceSeparator, k);
    const uint64_t seed = req.params.seed ? *req.params.seed + uint64_t(k) : seed_source_();
    auto seq = std::make_unique<Request>(seq_id, req.prompt_token_ids, req.params, config_.eos_token_ids, seed);
    if (req.pooling) {
      seq->pooling = true;
      seq->sampling_params.max_tokens = 0;  // prefill only (Scheduler::check_request)
    }
    if (n > 1) seq->group_id = req.request_id;
    std::shared_ptr<structured::GrammarMatcher> matcher;
    if (req.grammar) matcher = std::make_shared<structured::GrammarMatcher>(req.grammar, req.grammar_options);
    seq->grammar = matcher;
    if (k > 0 && config_.cache.enable_prefix_caching)
      parent.deferred.push_back(std::move(seq));
    else
      scheduler_.add_request(std::move(seq));
    Sequence& entry = sequences_[seq_id];
    entry = {req.request_id, k, {}, nullptr};
    entry.matcher = std::move(matcher);
    entry.times.arrival = arrival;
    parent.seq_ids.push_back(seq_id);
  }
  parents_[req.request_id] = std::move(parent);
}

void Engine::finish_sequence(RequestOutput& out) {
  auto it = parents_.find(out.request_id);
  PYPTO_ASSERT(it != parents_.end(), "finished sequence of unknown request ", out.request_id);
  if (--it->second.num_unfinished == 0) {
    out.request_finished = true;
    for (const std::string& s : it->second.seq_ids) sequences_.erase(s);
    parents_.erase(it);
  }
}

void Engine::release_deferred(Parent& parent) {
  for (std::unique_ptr<Request>& r : parent.deferred) scheduler_.add_request(std::move(r));
  parent.deferred.clear();
}

int64_t Engine::num_pending_tokens() const {
  int64_t n = scheduler_.num_pending_tokens();
  for (const auto& [id, parent] : parents_)
    for (const std::unique_ptr<Request>& r : parent.deferred)
      n += r->num_prompt_tokens() + r->sampling_params.max_tokens;
  return n;
}

bool Engine::finish_request(const std::string& request_id, FinishReason reason, std::optional<int32_t> index) {
  auto it = parents_.find(request_id);
  if (it == parents_.end()) return false;
  const std::vector<std::string> seq_ids = it->second.seq_ids;  // finish_sequence may erase it
  // Deferred sequences that are finished never reach the scheduler.
  std::vector<std::unique_ptr<Request>> deferred_finished;
  auto& deferred = it->second.deferred;
  for (auto d = deferred.begin(); d != deferred.end();) {
    if (!index || sequences_.at((*d)->request_id).index == *index) {
      deferred_finished.push_back(std::move(*d));
      d = deferred.erase(d);
    } else {
      ++d;
    }
  }
  for (const std::string& seq_id : seq_ids) {
    if (index && sequences_.at(seq_id).index != *index) continue;
    const Request* r = scheduler_.get_request(seq_id);
    for (const std::unique_ptr<Request>& d : deferred_finished)
      if (d->request_id == seq_id) r = d.get();
    if (!r) continue;  // this sequence already finished and was reported
    RequestOutput out;
    out.request_id = request_id;
    out.index = sequences_.at(seq_id).index;
    out.finish_reason = reason;
    out.num_prompt_tokens = r->num_prompt_tokens();
    out.num_cached_tokens = r->num_cached_tokens.value_or(0);
    out.times = sequences_.at(seq_id).times;
    const std::string id = seq_id;
    scheduler_.finish_requests(std::span<const std::string>(&id, 1), status_for(reason));
    finish_sequence(out);
    pending_.push_back(std::move(out));
  }
  if (index && *index == 0) {
    auto p = parents_.find(request_id);
    if (p != parents_.end()) release_deferred(p->second);
  }
  return true;
}

RequestOutput Engine::to_output(const EngineCoreOutput& o, Clock::time_point now) {
  Sequence& seq = sequences_.at(o.req_id);
  if (!o.new_token_ids.empty()) {
    if (!seq.times.first_token) seq.times.first_token = now;
    seq.times.last_token = now;
  }
  RequestOutput out;
  out.request_id = seq.request_id;
  out.index = seq.index;
  out.new_token_ids = o.new_token_ids;
  out.new_logprobs = o.new_logprobs;
  out.finish_reason = o.finish_reason;
  out.stop_token_id = o.stop_token_id;
  out.num_prompt_tokens = o.num_prompt_tokens;
  out.num_cached_tokens = o.num_cached_tokens;
  out.num_draft_tokens = o.num_draft_tokens;
  out.num_accepted_draft_tokens = o.num_accepted_draft_tokens;
  out.times = seq.times;
  return out;
}

std::vector<RequestOutput> Engine::step() {
  PYPTO_PROF_SPAN(prof::Level::E2E, "step", "schedule");  // profiling (core/profiler.h)
  std::vector<RequestOutput> outs = std::move(pending_);
  pending_.clear();
  if (!scheduler_.has_unfinished_requests()) return outs;
  Clock::time_point t = Clock::now();
  SchedulerOutput so = scheduler_.schedule();
  // One timestamp for the step, taken before scheduling as vLLM's SCHEDULED event is. is_new is
  // also set when a preempted sequence resumes; the first scheduling is kept.
  for (const ScheduledRequest& s : so.scheduled)
    if (s.is_new) {
      RequestTimes& times = sequences_.at(s.req_id).times;
      if (!times.first_scheduled) times.first_scheduled = t;
    }
  trace_schedule(so, scheduler_);  // profiling: step tokens, request tracks
  stats_.schedule_seconds += seconds_since(t);
  if (so.empty()) return outs;
  ++stats_.steps;
  stats_.scheduled_tokens += so.total_num_scheduled_tokens;

  PYPTO_PROF_PHASE(prof::Level::E2E, "execute");
  // Grammar masks depend only on the tokens so far, so a mask that is not cached yet (a state's
  // first visit walks the vocabulary trie, up to ~2 ms) is computed while the model runs, and
  // sampling below finds it cached. Cached masks (nearly every step) cost a lookup: no thread
  // is started for them, which would only compete with the model's threads for the cores. The
  // matchers are not touched by this thread until the task is joined.
  // A constrained request verifying drafts masks each row with the state after the drafts
  // before it (engine/spec_grammar.h); those states' masks are computed the same way.
  std::vector<structured::GrammarMatcher*> masking;
  std::vector<std::unique_ptr<DraftGrammarStates>> draft_states(so.scheduled.size());
  std::vector<DraftGrammarStates*> draft_masking;
  for (size_t i = 0; i < so.scheduled.size(); ++i) {
    const ScheduledRequest& sr = so.scheduled[i];
    if (!sr.samples) continue;
    const auto& m = sequences_.at(sr.req_id).matcher;
    if (!m) continue;
    if (sr.num_draft_tokens == 0) {
      if (!m->next_mask_is_cached()) masking.push_back(m.get());
      continue;
    }
    draft_states[i] = std::make_unique<DraftGrammarStates>(
        *m, std::span<const int32_t>(sr.token_ids).last(size_t(sr.num_draft_tokens)));
    if (!draft_states[i]->masks_cached()) draft_masking.push_back(draft_states[i].get());
  }
  std::future<void> masks_ready;
  if (!masking.empty() || !draft_masking.empty())
    masks_ready = std::async(std::launch::async, [&masking, &draft_masking] {
      for (structured::GrammarMatcher* m : masking) m->next_mask();
      for (DraftGrammarStates* d : draft_masking) d->compute_masks();
    });
  ExecutorOutput& eo = step_output_;
  std::string error;
  t = Clock::now();
  const Clock::time_point step_start = t;  // the forward and the sampling: the cost model's step time
  try {
    executor_->execute(so, eo);
    const int64_t rows = so.num_sampling_rows();
    const int64_t width = config_.pooled_width > 0 ? config_.pooled_width : config_.vocab_size;
    if (eo.vocab_size != width || int64_t(eo.logits.size()) != rows * eo.vocab_size)
      error = str_cat("model executor returned ", eo.logits.size(), " values of width ", eo.vocab_size, " for ",
                      rows, " output rows of width ", width);
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (masks_ready.valid()) masks_ready.get();
  stats_.execute_seconds += seconds_since(t);
  if (!error.empty()) {
    // The step failed: every request in it ends with the error; the others keep running.
    log_error("engine step failed: ", error);
    ++stats_.failed_steps;
    for (const ScheduledRequest& s : so.scheduled) {
      const Request* r = scheduler_.get_request(s.req_id);
      if (!r) continue;
      RequestOutput out;
      out.request_id = sequences_.at(s.req_id).request_id;
      out.index = sequences_.at(s.req_id).index;
      out.finish_reason = FinishReason::Error;
      out.error = error;
      out.num_prompt_tokens = r->num_prompt_tokens();
      out.times = sequences_.at(s.req_id).times;
      scheduler_.finish_requests(std::span<const std::string>(&s.req_id, 1), RequestStatus::FinishedError);
      if (out.index == 0) {
        // Sequence 0 will not compute the prompt for the others: they compute it themselves.
        auto p = parents_.find(out.request_id);
        if (p != parents_.end()) release_deferred(p->second);
      }
      finish_sequence(out);
      outs.push_back(std::move(out));
    }
    return outs;
  }

  if (config_.pooled_width > 0) {
    finish_pooled(so, eo, outs);
    return outs;
  }

  t = Clock::now();
  PYPTO_PROF_PHASE(prof::Level::E2E, "sample");
  // One sampler row per logits row: a request verifying k drafts has k + 1 (engine/spec_verify.h),
  // row j seeing the drafts before it as output tokens.
  // A sampled request with a draft model's distributions is verified by rejection sampling
  // (sampling/rejection_sampler.h) after the batch: its rows go through sample_batch as cheap
  // greedy placeholders (which only sanitize them) so the batch keeps its row layout.
  static const SamplingParams kPlaceholder = [] {
    SamplingParams p;
    p.temperature = 0.0f;
    return p;
  }();
  std::vector<SamplerRow> rows;
  std::vector<std::vector<int32_t>> histories;  // output + drafts of each verifying request
  histories.reserve(so.scheduled.size());       // spans into it must stay valid
  std::vector<const DraftDistribution*> rejection(so.scheduled.size(), nullptr);
  for (size_t i = 0; i < so.scheduled.size(); ++i) {
    const ScheduledRequest& s = so.scheduled[i];
    if (!s.samples) continue;
    const Request* r = scheduler_.get_request(s.req_id);
    PYPTO_ASSERT(r != nullptr, "scheduled request ", s.req_id, " is gone");
    if (s.num_draft_tokens == 0) {
      rows.push_back({&r->sampling_params, r->prompt_token_ids, r->output_token_ids, r->eos_token_ids, r->seed, {}});
      const auto& matcher = sequences_.at(s.req_id).matcher;
      if (matcher)
        if (const structured::TokenMask* mask = matcher->next_mask()) rows.back().allowed_tokens = *mask;
      continue;
    }
    std::vector<int32_t>& h = histories.emplace_back(r->output_token_ids);
    h.insert(h.end(), s.token_ids.end() - s.num_draft_tokens, s.token_ids.end());
    if (const DraftProposer* d = scheduler_.drafter(); d && !r->sampling_params.is_greedy())
      if (const DraftDistribution* q = d->distribution(s.req_id)) {
        PYPTO_ASSERT(q->vocab == eo.vocab_size && int64_t(q->probs.size()) >= s.num_draft_tokens * q->vocab,
                     "request ", s.req_id, ": draft distributions do not cover its ", s.num_draft_tokens, " drafts");
        rejection[i] = q;
      }
    for (int64_t j = 0; j <= s.num_draft_tokens; ++j) {
      rows.push_back({rejection[i] ? &kPlaceholder : &r->sampling_params, r->prompt_token_ids,
                      std::span<const int32_t>(h).first(r->output_token_ids.size() + size_t(j)), r->eos_token_ids,
                      r->seed, {}});
      if (draft_states[i])
        if (const structured::TokenMask* mask = draft_states[i]->mask(size_t(j))) rows.back().allowed_tokens = *mask;
    }
  }
  const std::vector<SampledToken> sampled = sample_batch(
      eo.logits, eo.vocab_size, rows,
      [this](int64_t n, const std::function<void(int64_t)>& fn) { executor_->parallel_rows(n, fn); });
  // Each sampling request's run: its one token, or its accepted drafts and the target's token.
  std::vector<std::vector<SampledToken>> runs(so.scheduled.size());
  size_t row = 0;
  for (size_t i = 0; i < so.scheduled.size(); ++i) {
    const ScheduledRequest& s = so.scheduled[i];
    if (!s.samples) continue;
    const std::span<const SampledToken> verify(sampled.data() + row, size_t(1 + s.num_draft_tokens));
    const std::span<const int32_t> drafts = std::span<const int32_t>(s.token_ids).last(size_t(s.num_draft_tokens));
    if (rejection[i]) {
      const size_t V = size_t(eo.vocab_size), first = row;
      const Request* r = scheduler_.get_request(s.req_id);
      std::vector<SamplerRow> own(rows.begin() + std::ptrdiff_t(first), rows.begin() + std::ptrdiff_t(first + verify.size()));
      for (SamplerRow& o : own) o.params = &r->sampling_params;
      runs[i] = rejection_sample(std::span<float>(eo.logits).subspan(first * V, verify.size() * V), eo.vocab_size,
                                 drafts, std::span<const float>(rejection[i]->probs).first(drafts.size() * V), own);
    } else {
      const size_t accepted = accepted_prefix(verify, drafts);
      runs[i].assign(verify.begin(), verify.begin() + std::ptrdiff_t(accepted + 1));
    }
    row += verify.size();
    // The grammar follows the verified run only: the rejected drafts' states were copies.
    // A token outside the mask can only come from a bug: the matcher then allows only EOS, so
    // the sequence ends rather than continue with output that breaks its grammar.
    if (const auto& matcher = sequences_.at(s.req_id).matcher)
      for (const SampledToken& t : runs[i])
        if (!matcher->accept(t.token_id)) {
          if (!matcher->error().empty()) log_error("request ", s.req_id, ": its grammar failed: ", matcher->error());
          else log_error("request ", s.req_id, ": sampled token ", t.token_id, " that its grammar does not allow");
          break;
        }
  }
  stats_.sample_seconds += seconds_since(t);
  scheduler_.observe_step_seconds(so, eo.step_seconds >= 0 ? eo.step_seconds : seconds_since(step_start));

  t = Clock::now();

  PYPTO_PROF_PHASE(prof::Level::E2E, "update");
  const std::vector<EngineCoreOutput> core_outs = scheduler_.update_from_output(so, runs);
  trace_update(so, scheduler_, core_outs);  // profiling: the tokens the step's decode rows emitted
  // The tokens' timestamp (vLLM's engine-core output timestamp): the step's outputs exist now.
  const Clock::time_point produced = Clock::now();
  for (const EngineCoreOutput& o : core_outs) {
    RequestOutput out = to_output(o, produced);
    // A grammar that outgrew its limits (CompiledGrammar::kMaxDfaStates) allowed only EOS from
    // then on: the sequence ends as failed, with the reason, rather than as if it were complete.
    if (const auto& m = sequences_.at(o.req_id).matcher; m && out.finish_reason && !m->error().empty()) {
      out.finish_reason = FinishReason::Error;
      out.error = str_cat("the request's grammar failed: ", m->error());
    }
    if (out.index == 0) {
      // Sequence 0 has computed the prompt (and its blocks are published): release the others.
      auto p = parents_.find(out.request_id);
      if (p != parents_.end() && !p->second.deferred.empty()) release_deferred(p->second);
    }
    stats_.generated_tokens += int64_t(out.new_token_ids.size());
    if (out.finish_reason) finish_sequence(out);
    outs.push_back(std::move(out));
  }
  stats_.update_seconds += seconds_since(t);
  return outs;
}

bool Engine::has_unfinished_requests() const { return !parents_.empty() || !pending_.empty(); }

}  // namespace pypto
