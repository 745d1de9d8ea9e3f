#include "engine/engine_loop.h"

#include <exception>

#include "core/error.h"
#include "core/log.h"

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
    if (stop_) fail("request ", req.request_id, ": the engine is shutting down");
    if (streams_.contains(req.request_id)) fail("request ", req.request_id, ": a request with this id is already running");
    streams_[req.request_id] = stream;
    new_requests_.push_back(req);
  }
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

void EngineLoop::run() {
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
      stopping = stop_;
    }

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

    try {
      std::vector<RequestOutput> step_outs = engine_->step();
      outs.insert(outs.end(), std::make_move_iterator(step_outs.begin()), std::make_move_iterator(step_outs.end()));
    } catch (const std::exception& e) {
      // Engine::step reports model failures per request; anything reaching here is a bug.
      log_error("engine loop: step threw: ", e.what());
    }

    {
      std::lock_guard lock(mu_);
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

}  // namespace pypto
