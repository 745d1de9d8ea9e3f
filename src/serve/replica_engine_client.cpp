#include "serve/replica_engine_client.h"

#include "core/error.h"

namespace pypto {

ReplicaSetEngineClient::ReplicaSetEngineClient(std::shared_ptr<ReplicaSet> replicas) : replicas_(std::move(replicas)) {
  PYPTO_ASSERT(replicas_ && replicas_->num_engines() > 0, "ReplicaSetEngineClient needs at least one replica");
}

EngineClient::Submitted ReplicaSetEngineClient::add_request(const EngineRequest& req) {
  ReplicaSet::Submitted s = replicas_->add_request(req);
  return {std::move(s.stream), s.engine_index};
}

void ReplicaSetEngineClient::finish_request(size_t engine_index, const std::string& request_id, FinishReason reason,
                                            std::optional<int32_t> index) {
  // One sequence goes straight to its replica's loop; the set forgets the request once its stream
  // has delivered the final output.
  if (index) replicas_->loop(engine_index).finish_request(request_id, reason, index);
  else replicas_->finish_request(engine_index, request_id, reason);
}

size_t ReplicaSetEngineClient::num_engines() const { return replicas_->num_engines(); }

bool ReplicaSetEngineClient::is_alive(size_t engine_index) const { return replicas_->loop(engine_index).is_alive(); }

EngineLoopStats ReplicaSetEngineClient::stats(size_t engine_index) const { return replicas_->loop(engine_index).stats(); }

int64_t ReplicaSetEngineClient::num_active_requests(size_t engine_index) const {
  return int64_t(replicas_->loop(engine_index).num_active_requests());
}

}  // namespace pypto
