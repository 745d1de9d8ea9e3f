#pragma once
// Data parallelism: N independent engine replicas (own scheduler, KV pool, threads) behind one
// router. add_request picks a replica with the routing policy from each replica's current load
// (parallel/load_book.h) and queues the request there; finish_request goes to the replica that
// got it. Thread-safe: HTTP handlers and the offline driver call it concurrently. The loops are
// owned by the caller (LoadedEngine) and must outlive the set.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_loop.h"
#include "engine/model_executor.h"
#include "parallel/load_book.h"
#include "parallel/prefix_index.h"
#include "parallel/router.h"

namespace pypto {

// Wraps a replica's executor to report, after every step, each scheduled sequence's computed
// tokens and the finished ones to the replica's LoadBook (runs on the engine thread).
class LoadReportingExecutor : public ModelExecutor {
 public:
  LoadReportingExecutor(std::unique_ptr<ModelExecutor> inner, std::shared_ptr<LoadBook> book);
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override;
  // The sampler's rows run on the wrapped executor's compute threads (not one by one here).
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override { inner_->parallel_rows(n, fn); }

 private:
  std::unique_ptr<ModelExecutor> inner_;
  std::shared_ptr<LoadBook> book_;
};

struct RouterOptions {
  RoutingPolicy policy = RoutingPolicy::LeastPendingTokens;
  int64_t affinity_slack_tokens = kDefaultAffinitySlackTokens;
  int32_t block_size = 16;          // prefix_affinity: the engines' KV block size
  size_t prefix_index_blocks = 1 << 16;  // prefix_affinity: block hashes remembered per replica
  int64_t max_model_len = 0;        // caps a request's max new tokens in its load (0: no cap)
};

class ReplicaSet {
 public:
  struct Replica {
    EngineLoop* loop = nullptr;
    std::shared_ptr<LoadBook> load;  // the same book its LoadReportingExecutor writes
  };
  ReplicaSet(std::vector<Replica> replicas, const RouterOptions& opt);

  struct Submitted {
    std::shared_ptr<RequestStream> stream;
    size_t engine_index = 0;
  };
  // Routes, validates and queues; throws Error (nothing queued, routing state unchanged) when
  // the replica's engine rejects the request.
  Submitted add_request(const EngineRequest& req);
  // Sends the finish to the replica recorded for the request (unknown ids are ignored).
  void finish_request(const std::string& request_id, FinishReason reason = FinishReason::Abort);
  void finish_request(size_t engine_index, const std::string& request_id, FinishReason reason);

  size_t num_engines() const { return replicas_.size(); }
  EngineLoop& loop(size_t i) { return *replicas_[i].loop; }
  const EngineLoop& loop(size_t i) const { return *replicas_[i].loop; }
  // Replica i's load now (pending tokens, as the router sees it).
  int64_t pending_tokens(size_t i) const { return replicas_[i].load->pending_tokens(); }

  // How many requests / prompt tokens each replica was given (for the spread report).
  struct RoutedCounts {
    int64_t requests = 0;
    int64_t prompt_tokens = 0;
  };
  std::vector<RoutedCounts> routed_counts() const;

  // Shuts every replica's loop down (aborting what is in flight).
  void shutdown();

 private:
  struct InFlight {
    size_t replica = 0;
    std::shared_ptr<RequestStream> stream;
  };
  // Forgets requests whose stream has delivered its final output (caller holds mu_).
  void sweep_finished();

  std::vector<Replica> replicas_;
  std::vector<std::unique_ptr<PrefixIndex>> prefixes_;  // prefix_affinity only
  RouterOptions opt_;
  mutable std::mutex mu_;
  Router router_;
  std::unordered_map<std::string, InFlight> in_flight_;
  std::vector<RoutedCounts> counts_;
};

}  // namespace pypto
