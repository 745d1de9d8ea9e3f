#pragma once
// Start-up for tensor- and data-parallel serving: checkpoint → one staged weight slice per TP
// rank index (shared read-only by every replica) → per replica: a backend per rank pinned to its
// core group, its KV cache share, a TpModelRunner, an Engine on its EngineLoop → a ReplicaSet
// routing over them. dp = tp = 1 is the plain single engine.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_capacity.h"
#include "engine/model_runner.h"
#include "io/model_config.h"
#include "parallel/device_groups.h"
#include "parallel/replicas/replica_set.h"
#include "parallel/router.h"

namespace pypto {

struct ReplicaLoadOptions {
  // Per replica: scheduler limits, block size / prefix caching, KV dtype. kv_cache_memory is the
  // budget of one replica (all its ranks); without it memory_utilization of the memory free
  // after staging is split evenly over the replicas. threads: compute threads per rank (0: every
  // core of its group). engine.cores is ignored: the layout places the ranks.
  EngineLoadOptions engine;
  ParallelLayout layout;
  RoutingPolicy routing = RoutingPolicy::LeastPendingTokens;
  int64_t affinity_slack_tokens = kDefaultAffinitySlackTokens;
};

struct LoadedReplicas {
  std::unique_ptr<ReplicaSet> replicas;
  ModelConfig config;
  KvCapacity capacity;                    // of one replica
  std::vector<size_t> rank_weight_bytes;  // staged bytes of each TP rank's slice (shared by replicas)
  double load_seconds = 0;                // checkpoint open + staging
  std::string backend_name;
  int threads_per_rank = 0;
  std::string summary;                    // placement, one line per replica, for the start-up log
};

// Throws Error naming the flag, file or tensor at fault (e.g. --tp not dividing the KV heads).
LoadedReplicas load_replicas(const ReplicaLoadOptions& opt);

}  // namespace pypto
