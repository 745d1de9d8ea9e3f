#include "engine/engine_loop.h"

#include "core/profiler.h"

#include <chrono>
#include <exception>

#include "core/error.h"
#include "core/log.h"
#include "engine/draft_proposer.h"

namespace pypto {

std::optional<RequestOutput> RequestStream::next() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return !queue_.empty() || final_taken_; });
  if (queue_.empty()) return std::nullopt;
  RequestOutput out = std::move(queue_.front());
  queue_.pop_front();
  if (out.request_finished) final_taken_ = true;
  return out;
}

std::vector<RequestOutput> RequestStream::drain() {
  std::lock_guard lock(mu_);
  std::vector<RequestOutput> out(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.end()));
  queue_.clear();
  for (const RequestOutput& o : out)
    if (o.request_finished) final_taken_ = true;
  return out;
}

bool RequestStream::finished() const {
  std::lock_guard lock(mu_);
  return final_pushed_;
}

void RequestStream::push(RequestOutput out) {
  {
    std::lock_guard lock(mu_);
    if (out.request_finished) final_pushed_ = true;
    queue_.push_back(std::move(out));
  }
  cv_.notify_all();
}

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {
  PYPTO_ASSERT(engine_ != nullptr);
  thread_ = std::thread([this] { run(); });
}

EngineLoop::~EngineLoop() { shutdown(); }

std::shared_ptr<RequestStream> EngineLoop::add_request(const EngineRequest& req) {
  engine_->validate_request(req);  // const, touches only immutable configuration
  auto stream = std::make_shared<RequestStream>();
  {
    std::lock_guard lock(mu_);
    if (!alive_) fail("request ", req.request_id, ": the engine loop has stopped: ", death_reason_);
    if (stop_) fail("request ", req.request_id, ": the engine is shutting down");
    if (streams_.contains(req.request_id)) fail("request ", req.request_id, ": a request with this id is already running");
    streams_[req.request_id] = stream;
    new_requests_.push_back(req);
    // The engine's arrival (queue time starts here, as prof::request_arrived's "queued" track).
    if (!new_requests_.back().arrival_time) new_requests_.back().arrival_time = std::chrono::steady_clock::now();
    queued_tokens_ += (int64_t(req.prompt_token_ids.size()) + req.params.max_tokens) * req.params.n;
  }
  if (prof::active(prof::Level::E2E)) prof::request_arrived(req.request_id);  // profiling
  cv_.notify_all();
  return stream;
}

void EngineLoop::finish_request(const std::string& request_id, FinishReason reason, std::optional<int32_t> index) {
  {
    std::lock_guard lock(mu_);
    finishes_.push_back({request_id, reason, index});
  }
  cv_.notify_all();
}

void EngineLoop::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

size_t EngineLoop::num_active_requests() const {
  std::lock_guard lock(mu_);
  return streams_.size();
}

bool EngineLoop::is_alive() const {
  std::lock_guard lock(mu_);
  return alive_;
}

int64_t EngineLoop::num_pending_tokens() const {
  std::lock_guard lock(mu_);
  return stats_.pending_tokens + queued_tokens_ + taken_tokens_;
}

EngineLoopStats EngineLoop::stats() const {
  std::lock_guard lock(mu_);
  EngineLoopStats s = stats_;
  s.alive = alive_;
  s.pending_tokens += queued_tokens_ + taken_tokens_;
  return s;
}

void EngineLoop::refresh_stats_locked() {
  const Scheduler& sched = engine_->scheduler();
  const BlockPool& pool = sched.kv_cache_manager().block_pool();
  stats_.num_running = int64_t(sched.num_running());
  stats_.num_waiting = int64_t(sched.num_waiting());
  stats_.pending_tokens = engine_->num_pending_tokens();
  stats_.num_blocks = pool.num_blocks();
  stats_.num_free_blocks = pool.num_free_blocks();
  stats_.kv_usage = pool.usage();
  stats_.prefix_cache = sched.kv_cache_manager().prefix_cache_stats();
  stats_.num_preemptions = sched.num_preemptions();
  stats_.prefill = sched.prefill_progress();
  stats_.speculative = sched.config().speculative.enabled();
  stats_.num_speculative_tokens = sched.config().speculative.num_speculative_tokens;
  stats_.spec_decode = sched.spec_decode_stats();
  if (const DraftProposer* d = sched.drafter()) stats_.spec_decode.draft_prefix_cache = d->prefix_cache_stats();
  stats_.spec_cost = sched.spec_cost_model().stats();
  stats_.engine = engine_->stats();
  taken_tokens_ = 0;  // now counted by the engine itself
}

void EngineLoop::run() {
  try {
    loop_body();
  } catch (const std::exception& e) {
    // A bug, not a model failure (Engine::step reports those per request). Never leave a client
    // waiting on a stream that nothing will feed: end every one with the error.
    log_error("engine loop stopped: ", e.what());
    std::lock_guard lock(mu_);
    alive_ = false;
    death_reason_ = e.what();
    for (auto& [id, stream] : streams_) {
      RequestOutput o;
      o.request_id = id;
      o.finish_reason = FinishReason::Error;
      o.error = str_cat("engine loop stopped: ", e.what());
      o.request_finished = true;
      stream->push(std::move(o));
    }
    streams_.clear();
    return;
  }
  std::lock_guard lock(mu_);
  alive_ = false;
  death_reason_ = "shut down";
}

void EngineLoop::loop_body() {
  for (;;) {
    std::vector<EngineRequest> adds;
    std::vector<Finish> finishes;
    bool stopping;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        return stop_ || !new_requests_.empty() || !finishes_.empty() || engine_->has_unfinished_requests();
      });
      adds.swap(new_requests_);
      finishes.swap(finishes_);
      taken_tokens_ += queued_tokens_;
      queued_tokens_ = 0;
      stopping = stop_;
    }

    PYPTO_PROF_SPAN(prof::Level::E2E, "iteration");  // profiling: one loop pass that has work
    std::vector<RequestOutput> outs;
    for (const EngineRequest& req : adds) {
      try {
        engine_->add_request(req);
      } catch (const std::exception& e) {
        RequestOutput o;
        o.request_id = req.request_id;
        o.finish_reason = FinishReason::Error;
        o.error = e.what();
        o.request_finished = true;
        outs.push_back(std::move(o));
      }
    }
    if (stopping) {
      std::vector<std::string> ids;
      {
        std::lock_guard lock(mu_);
        for (const auto& [id, s] : streams_) ids.push_back(id);
      }
      for (const std::string& id : ids) finishes.push_back({id, FinishReason::Abort, std::nullopt});
    }
    for (const Finish& f : finishes) engine_->finish_request(f.request_id, f.reason, f.index);

    std::vector<RequestOutput> step_outs = engine_->step();
    outs.insert(outs.end(), std::make_move_iterator(step_outs.begin()), std::make_move_iterator(step_outs.end()));

    {
      std::lock_guard lock(mu_);
      refresh_stats_locked();
      for (RequestOutput& o : outs) {
        auto it = streams_.find(o.request_id);
        if (it == streams_.end()) continue;
        std::shared_ptr<RequestStream> s = it->second;
        if (o.request_finished) streams_.erase(it);
        s->push(std::move(o));
      }
    }
    if (stopping && !engine_->has_unfinished_requests()) return;
  }
}

DraftProposer* EngineLoop::drafter() const { return engine_->scheduler().drafter(); }

}  // namespace pypto
