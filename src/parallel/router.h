#pragma once
// The data-parallel routing policy: which replica serves a new request, given a snapshot of
// every replica's load. Pure logic with no engine types, so its choices can be pinned exactly by
// unit tests; ReplicaSet (parallel/replicas) gathers the loads and applies the choice.
#include <cstdint>
#include <string>
#include <vector>

namespace pypto {

enum class RoutingPolicy {
  // The seed's policy: the replica with the fewest pending tokens; ties rotate round-robin
  // (the first tied replica at or after the last winner + 1).
  LeastPendingTokens,
  // Replicas in turn, regardless of load.
  RoundRobin,
  // The replica whose prefix cache holds the longest prefix of the prompt, unless its pending
  // tokens exceed the least loaded replica's by more than the slack; otherwise (or with no
  // cached prefix anywhere) least_pending_tokens.
  PrefixAffinity,
};

// "least_pending_tokens" | "round_robin" | "prefix_affinity"; Error listing the choices otherwise.
RoutingPolicy parse_routing_policy(const std::string& name);
const char* routing_policy_name(RoutingPolicy p);

// Pending tokens a prefix_affinity replica may carry above the least loaded one (about one
// long prompt's prefill): beyond it, reusing the cache costs more in queueing than it saves.
constexpr int64_t kDefaultAffinitySlackTokens = 2048;

struct ReplicaLoad {
  // Σ over the replica's unfinished requests of (prompt tokens not yet computed + tokens still to
  // generate), including requests routed to it but not yet queued by its engine.
  int64_t pending_tokens = 0;
  // prefix_affinity only: tokens of the new prompt that replica's prefix cache holds.
  int64_t cached_prefix_tokens = 0;
};

class Router {
 public:
  Router(RoutingPolicy policy, int num_replicas, int64_t affinity_slack_tokens = kDefaultAffinitySlackTokens);

  // The replica for the next request (loads.size() == num_replicas); remembers the winner for
  // the rotation.
  int choose(const std::vector<ReplicaLoad>& loads);

  RoutingPolicy policy() const { return policy_; }
  int num_replicas() const { return n_; }
  int last_winner() const { return last_; }

 private:
  // Among `candidates` (flags), the first at or after last_ + 1, cyclically.
  int rotate(const std::vector<bool>& candidates) const;
  int least_pending(const std::vector<ReplicaLoad>& loads) const;

  RoutingPolicy policy_;
  int n_;
  int64_t slack_;
  int last_ = -1;
};

}  // namespace pypto
