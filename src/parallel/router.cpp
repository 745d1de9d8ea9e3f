#include "parallel/router.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

RoutingPolicy parse_routing_policy(const std::string& name) {
  if (name == "least_pending_tokens") return RoutingPolicy::LeastPendingTokens;
  if (name == "round_robin") return RoutingPolicy::RoundRobin;
  if (name == "prefix_affinity") return RoutingPolicy::PrefixAffinity;
  fail("--data-parallel-routing '", name, "': expected least_pending_tokens, round_robin or prefix_affinity");
}

const char* routing_policy_name(RoutingPolicy p) {
  switch (p) {
    case RoutingPolicy::LeastPendingTokens: return "least_pending_tokens";
    case RoutingPolicy::RoundRobin: return "round_robin";
    case RoutingPolicy::PrefixAffinity: return "prefix_affinity";
  }
  return "?";
}

Router::Router(RoutingPolicy policy, int num_replicas, int64_t affinity_slack_tokens)
    : policy_(policy), n_(num_replicas), slack_(affinity_slack_tokens) {
  if (num_replicas < 1) fail("a router needs at least one replica, got ", num_replicas);
  if (affinity_slack_tokens < 0) fail("prefix-affinity slack ", affinity_slack_tokens, " must not be negative");
}

int Router::rotate(const std::vector<bool>& candidates) const {
  for (int k = 1; k <= n_; ++k) {
    const int i = (last_ + k) % n_;
    if (candidates[size_t(i)]) return i;
  }
  PYPTO_ASSERT(false, "no candidate replica");
  return 0;
}

int Router::least_pending(const std::vector<ReplicaLoad>& loads) const {
  int64_t best = loads[0].pending_tokens;
  for (const ReplicaLoad& l : loads) best = std::min(best, l.pending_tokens);
  std::vector<bool> tied(static_cast<size_t>(n_));
  for (int i = 0; i < n_; ++i) tied[size_t(i)] = loads[size_t(i)].pending_tokens == best;
  return rotate(tied);
}

int Router::choose(const std::vector<ReplicaLoad>& loads) {
  PYPTO_ASSERT(static_cast<int>(loads.size()) == n_, loads.size(), " loads for ", n_, " replicas");
  int winner = 0;
  switch (policy_) {
    case RoutingPolicy::RoundRobin:
      winner = (last_ + 1) % n_;
      break;
    case RoutingPolicy::LeastPendingTokens:
      winner = least_pending(loads);
      break;
    case RoutingPolicy::PrefixAffinity: {
      int64_t best_prefix = 0, min_load = loads[0].pending_tokens;
      for (const ReplicaLoad& l : loads) {
        best_prefix = std::max(best_prefix, l.cached_prefix_tokens);
        min_load = std::min(min_load, l.pending_tokens);
      }
      if (best_prefix == 0) {
        winner = least_pending(loads);
        break;
      }
      // Replicas holding the longest prefix and within the slack; the least loaded of them
      // (ties rotate). None within the slack: plain least_pending_tokens.
      int64_t best_load = INT64_MAX;
      for (const ReplicaLoad& l : loads)
        if (l.cached_prefix_tokens == best_prefix && l.pending_tokens - min_load <= slack_)
          best_load = std::min(best_load, l.pending_tokens);
      if (best_load == INT64_MAX) {
        winner = least_pending(loads);
        break;
      }
      std::vector<bool> ok(static_cast<size_t>(n_));
      for (int i = 0; i < n_; ++i)
        ok[size_t(i)] = loads[size_t(i)].cached_prefix_tokens == best_prefix && loads[size_t(i)].pending_tokens == best_load;
      winner = rotate(ok);
      break;
    }
  }
  last_ = winner;
  return winner;
}

}  // namespace pypto
