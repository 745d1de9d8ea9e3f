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
    s.engine_id = str_cat(request_id_, "-", spec.prompt_index, "-", spec.index);
    s.detok = std::make_unique<IncrementalDetokenizer>(state_.ctx.tokenizer, skip_special_tokens_);
    s.stop = std::make_unique<StopChecker>(spec.params.stop);
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

  for (Seq& s : seqs_) {
    EngineRequest req;
    req.request_id = s.engine_id;
    req.prompt_token_ids = s.spec.prompt_token_ids;
    req.params = s.spec.params;
    try {
      EngineClient::Submitted sub = state_.ctx.engines->add_request(req);
      s.stream = std::move(sub.stream);
      s.engine = sub.engine_index;
      s.submitted = true;
      ++*state_.in_flight[s.engine];
    } catch (const Error& e) {
      // Nothing of this request may stay queued.
      for (Seq& t : seqs_) {
        if (t.submitted) {
          state_.ctx.engines->finish_request(t.engine, t.engine_id, FinishReason::Abort);
          release(t);
        }
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
  const double e2e = std::chrono::duration<double>(std::chrono::steady_clock::now() - arrival_).count();
  state_.metrics->request_finished(s.engine, reason, int64_t(s.spec.prompt_token_ids.size()), s.num_tokens, e2e);
  release(s);
}

void Generation::handle(Seq& s, RequestOutput& o, ChoiceDelta& d) {
  const auto now = std::chrono::steady_clock::now();
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
    const StopChecker::Result r = s.stop->append(s.detok->push(id));
    d.text += r.text;
    if (r.stopped()) {
      state_.metrics->add_generation_tokens(s.engine, consumed);
      state_.ctx.engines->finish_request(s.engine, s.engine_id, FinishReason::Stop);
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
      log_warn("request ", s.engine_id, " failed in the engine: ", o.error);
    }
    finish(s, d, r.stopped() ? "stop" : finish_reason_text(*o.finish_reason));
  }
}

std::vector<ChoiceDelta> Generation::poll(std::chrono::milliseconds budget) {
  std::vector<ChoiceDelta> deltas;
  const auto deadline = std::chrono::steady_clock::now() + budget;
  auto sleep = std::chrono::microseconds(200);
  for (;;) {
    for (Seq& s : seqs_) {
      if (s.finished || !s.stream) continue;
      std::vector<RequestOutput> outs = s.stream->drain();
      if (outs.empty()) continue;
      ChoiceDelta d;
      d.index = s.spec.index;
      for (RequestOutput& o : outs) {
        if (s.finished) break;
        handle(s, o, d);
      }
      deltas.push_back(std::move(d));
    }
    if (!deltas.empty() || done() || std::chrono::steady_clock::now() >= deadline) return deltas;
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::microseconds(1000));
  }
}

std::vector<ChoiceDelta> Generation::abort() {
  std::vector<ChoiceDelta> deltas;
  for (Seq& s : seqs_) {
    if (s.finished) continue;
    if (s.submitted) state_.ctx.engines->finish_request(s.engine, s.engine_id, FinishReason::Abort);
    ChoiceDelta d;
    d.index = s.spec.index;
    if (s.submitted) {
      finish(s, d, "abort");
    } else {
      s.finished = true;
      --num_unfinished_;
      d.finish_reason = "abort";
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
