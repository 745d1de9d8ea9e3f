#include "serve/engine_client.h"

#include "core/error.h"

namespace pypto {

LoopEngineClient::LoopEngineClient(std::vector<EngineLoop*> loops) : loops_(std::move(loops)) {
  PYPTO_ASSERT(!loops_.empty(), "LoopEngineClient needs at least one engine loop");
}

LoopEngineClient::LoopEngineClient(std::unique_ptr<EngineLoop> loop) : owned_(std::move(loop)) {
  PYPTO_ASSERT(owned_, "LoopEngineClient needs an engine loop");
  loops_.push_back(owned_.get());
}

EngineClient::Submitted LoopEngineClient::add_request(const EngineRequest& req) {
  size_t best = 0;
  int64_t best_load = loops_[0]->num_pending_tokens();
  for (size_t i = 1; i < loops_.size(); ++i) {
    const int64_t load = loops_[i]->num_pending_tokens();
    if (load < best_load) {
      best = i;
      best_load = load;
    }
  }
  return {loops_[best]->add_request(req), best};
}

void LoopEngineClient::finish_request(size_t engine_index, const std::string& request_id, FinishReason reason,
                                      std::optional<int32_t> index) {
  loops_.at(engine_index)->finish_request(request_id, reason, index);
}

bool LoopEngineClient::is_alive(size_t engine_index) const { return loops_.at(engine_index)->is_alive(); }

EngineLoopStats LoopEngineClient::stats(size_t engine_index) const { return loops_.at(engine_index)->stats(); }

int64_t LoopEngineClient::num_active_requests(size_t engine_index) const {
  return int64_t(loops_.at(engine_index)->num_active_requests());
}

}  // namespace pypto
