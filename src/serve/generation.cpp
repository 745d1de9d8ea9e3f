#include "serve/generation.h"

#include <thread>

#include "core/error.h"
#include "core/log.h"
#include "serve/openai_protocol.h"

namespace pypto {

const char* finish_reason_text(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    case FinishReason::Error: return "error";
  }
  return "error";
}

Generation::Generation(ServerState& state, std::string request_id, std::vector<SequenceSpec> specs,
                       bool skip_special_tokens, std::chrono::steady_clock::time_point arrival)
    : state_(state), request_id_(std::move(request_id)), skip_special_tokens_(skip_special_tokens), arrival_(arrival) {
  for (SequenceSpec& spec : specs) {
    Seq s;
    if (groups_.size() <= spec.prompt_index) groups_.resize(spec.prompt_index + 1);
    Group& g = groups_[spec.prompt_index];
    g.engine_id = str_cat(request_id_, "-", spec.prompt_index);
    if (g.seqs.size() <= size_t(spec.seq_index)) g.seqs.resize(size_t(spec.seq_index) + 1);
    g.seqs[size_t(spec.seq_index)] = seqs_.size();
    s.group = spec.prompt_index;
    s.detok = std::make_unique<IncrementalDetokenizer>(state_.ctx.tokenizer, skip_special_tokens_);
    s.stop = std::make_unique<StopChecker>(spec.params.stop);
    s.spec_stats = SpecRequestStats(state_.options.num_speculative_tokens, state_.options.per_request_spec_decode_stats);
    s.spec = std::move(spec);
    seqs_.push_back(std::move(s));
  }
  num_unfinished_ = seqs_.size();
}

Generation::~Generation() {
  abort();
  for (Seq& s : seqs_) release(s);
  state_.total_in_flight -= reserved_;
}

void Generation::submit() {
  // Admission: sequences beyond the engines' running capacity wait; at most max_queued_requests.
  const int64_t n = int64_t(seqs_.size());
  const int64_t capacity = int64_t(state_.ctx.max_num_seqs) * int64_t(state_.ctx.engines->num_engines());
  int64_t cur = state_.total_in_flight.load();
  for (;;) {
    const int64_t waiting_after = std::max<int64_t>(0, cur + n - capacity);
    if (waiting_after > 0 && waiting_after > state_.options.max_queued_requests) {
      state_.metrics->request_rejected("queue_full");
      throw ApiError(503,
                     str_cat("the server is busy: ", std::max<int64_t>(0, cur - capacity),
                             " requests are already waiting (limit --max-queued-requests ",
                             state_.options.max_queued_requests, "); retry later"),
                     "service_unavailable", std::nullopt, "queue_full");
    }
    if (state_.total_in_flight.compare_exchange_weak(cur, cur + n)) break;
  }
  reserved_ = n;

  for (Group& g : groups_) {
    const Seq& first = seqs_[g.seqs.at(0)];
    EngineRequest req;
    req.request_id = g.engine_id;
    req.prompt_token_ids = first.spec.prompt_token_ids;
    req.params = first.spec.params;  // sequence 0's seed is the base seed
    req.params.n = int32_t(g.seqs.size());
    req.grammar = first.spec.grammar;
    req.grammar_options = first.spec.grammar_options;
    try {
      EngineClient::Submitted sub = state_.ctx.engines->add_request(req);
      g.stream = std::move(sub.stream);
      g.engine = sub.engine_index;
      g.submitted = true;
      for (size_t i : g.seqs) {
        seqs_[i].engine = g.engine;
        seqs_[i].submitted = true;
        ++*state_.in_flight[g.engine];
      }
    } catch (const Error& e) {
      // Nothing of this request may stay queued.
      for (Group& h : groups_)
        if (h.submitted) state_.ctx.engines->finish_request(h.engine, h.engine_id, FinishReason::Abort);
      for (Seq& t : seqs_) {
        release(t);
        t.finished = true;
      }
      num_unfinished_ = 0;
      throw api_error_from_engine(e.what());
    }
  }
}

void Generation::release(Seq& s) {
  if (!s.submitted) return;
  s.submitted = false;
  --*state_.in_flight[s.engine];
  --state_.total_in_flight;
  --reserved_;
}

void Generation::finish(Seq& s, ChoiceDelta& d, const std::string& reason) {
  s.finished = true;
  --num_unfinished_;
  d.finish_reason = reason;
  if (state_.options.per_request_spec_decode_stats != SpecStatsLevel::None) d.spec_stats = s.spec_stats;
  const double e2e = std::chrono::duration<double>(std::chrono::steady_clock::now() - arrival_).count();
  state_.metrics->request_finished(s.engine, reason, int64_t(s.spec.prompt_token_ids.size()), s.num_tokens, e2e,
                                   request_phase_times(s.times, s.num_tokens));
  release(s);
}

void Generation::handle(Seq& s, RequestOutput& o, ChoiceDelta& d) {
  const auto now = std::chrono::steady_clock::now();
  s.times = o.times;
  // Counted before a stop string may end the sequence in this output: the engine counted the step.
  if (state_.options.per_request_spec_decode_stats != SpecStatsLevel::None)
    s.spec_stats.observe(o.num_draft_tokens, o.num_accepted_draft_tokens);
  if (!o.new_token_ids.empty()) {
    const double dt = std::chrono::duration<double>(now - (s.got_output ? s.last_output : arrival_)).count();
    if (s.got_output) state_.metrics->observe_itl(s.engine, dt);
    else state_.metrics->observe_ttft(s.engine, dt);
    s.got_output = true;
    s.last_output = now;
    s.num_cached = o.num_cached_tokens;
  }
  const bool want_logprobs = s.spec.params.logprobs.has_value();
  const size_t n = o.new_token_ids.size();
  // A stop token (eos or stop_token_ids) ends the output: counted, never shown as text.
  const bool last_is_stop_token = o.finish_reason == FinishReason::Stop && o.stop_token_id && n > 0 &&
                                  o.new_token_ids.back() == *o.stop_token_id;
  int64_t consumed = 0;
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = o.new_token_ids[i];
    ++consumed;
    ++s.num_tokens;
    if (want_logprobs && i < o.new_logprobs.size())
      d.tokens.push_back({id, o.new_logprobs[i].logprob, o.new_logprobs[i].top_logprobs});
    if (i + 1 == n && last_is_stop_token) break;
    // Ids past the tokenizer's vocabulary (Qwen3 pads 151,669 tokens to 151,936 embedding rows;
    // only random-weight models sample them) have no text, as in Hugging Face's decode.
    const StopChecker::Result r =
        s.stop->append(id < state_.ctx.tokenizer->vocab_size() ? s.detok->push(id) : std::string());
    d.text += r.text;
    if (r.stopped()) {
      state_.metrics->add_generation_tokens(s.engine, consumed);
      state_.ctx.engines->finish_request(s.engine, groups_[s.group].engine_id, FinishReason::Stop, s.spec.seq_index);
      finish(s, d, "stop");
      return;
    }
  }
  state_.metrics->add_generation_tokens(s.engine, consumed);
  if (o.finish_reason) {
    const StopChecker::Result r = s.stop->append(s.detok->flush());
    d.text += r.text;
    if (!r.stopped()) d.text += s.stop->flush();
    if (*o.finish_reason == FinishReason::Error) {
      d.error = o.error.empty() ? std::string("unknown engine error") : o.error;
      log_warn("request ", groups_[s.group].engine_id, " sequence ", s.spec.seq_index, " failed in the engine: ", o.error);
    }
    finish(s, d, r.stopped() ? "stop" : finish_reason_text(*o.finish_reason));
  }
}

std::vector<ChoiceDelta> Generation::poll(std::chrono::milliseconds budget) {
  std::vector<ChoiceDelta> deltas;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  auto sleep = std::chrono::microseconds(200);
  for (;;) {
    for (Group& g : groups_) {
      if (!g.stream) continue;
      std::vector<RequestOutput> outs = g.stream->drain();
      if (outs.empty()) continue;
      std::vector<ChoiceDelta> ds(g.seqs.size());
      std::vector<bool> touched(g.seqs.size(), false);
      for (RequestOutput& o : outs) {
        if (o.index < 0 || size_t(o.index) >= g.seqs.size()) continue;
        Seq& s = seqs_[g.seqs[size_t(o.index)]];
        if (s.finished) continue;
        ds[size_t(o.index)].index = s.spec.index;
        touched[size_t(o.index)] = true;
        handle(s, o, ds[size_t(o.index)]);
      }
      for (size_t k = 0; k < ds.size(); ++k)
        if (touched[k]) deltas.push_back(std::move(ds[k]));
    }
    if (!deltas.empty() || done() || std::chrono::steady_clock::now() >= deadline) return deltas;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(1000));
  }
}

std::vector<ChoiceDelta> Generation::abort() {
  std::vector<ChoiceDelta> deltas;
  for (Group& g : groups_) {
    bool open = false;
    for (size_t i : g.seqs) open |= !seqs_[i].finished && seqs_[i].submitted;
    if (open) state_.ctx.engines->finish_request(g.engine, g.engine_id, FinishReason::Abort);
  }
  for (Seq& s : seqs_) {
    if (s.finished) continue;
    ChoiceDelta d;
    d.index = s.spec.index;
    if (s.submitted) {
      finish(s, d, "abort");
    } else {
      s.finished = true;
      --num_unfinished_;
      d.finish_reason = "abort";
      if (state_.options.per_request_spec_decode_stats != SpecStatsLevel::None) d.spec_stats = s.spec_stats;
    }
    deltas.push_back(std::move(d));
  }
  return deltas;
}

int64_t Generation::prompt_tokens() const {
  int64_t n = 0;
  std::vector<bool> seen;
  for (const Seq& s : seqs_) {
    if (seen.size() <= s.spec.prompt_index) seen.resize(s.spec.prompt_index + 1, false);
    if (seen[s.spec.prompt_index]) continue;
    seen[s.spec.prompt_index] = true;
    n += int64_t(s.spec.prompt_token_ids.size());
  }
  return n;
}

int64_t Generation::completion_tokens() const {
  int64_t n = 0;
  for (const Seq& s : seqs_) n += s.num_tokens;
  return n;
}

int64_t Generation::cached_tokens() const {
  int64_t n = 0;
  std::vector<bool> seen;
  for (const Seq& s : seqs_) {
    if (seen.size() <= s.spec.prompt_index) seen.resize(s.spec.prompt_index + 1, false);
    if (seen[s.spec.prompt_index]) continue;
    seen[s.spec.prompt_index] = true;
    n += s.num_cached;
  }
  return n;
}

}  // namespace pypto
