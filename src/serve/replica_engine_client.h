#pragma once
// EngineClient over the data-parallel ReplicaSet (src/parallel/replicas): the set routes (least
// pending tokens by default) and the server labels metrics with the replica index it chose.
#include <memory>

#include "parallel/replicas/replica_set.h"
#include "serve/engine_client.h"

namespace pypto {

class ReplicaSetEngineClient : public EngineClient {
 public:
  explicit ReplicaSetEngineClient(std::shared_ptr<ReplicaSet> replicas);

  Submitted add_request(const EngineRequest& req) override;
  void finish_request(size_t engine_index, const std::string& request_id, FinishReason reason,
                      std::optional<int32_t> index = std::nullopt) override;
  size_t num_engines() const override;
  bool is_alive(size_t engine_index) const override;
  int64_t num_active_requests(size_t engine_index) const override;
  EngineLoopStats stats(size_t engine_index) const override;

  ReplicaSet& replicas() { return *replicas_; }

 private:
  std::shared_ptr<ReplicaSet> replicas_;
};

}  // namespace pypto
