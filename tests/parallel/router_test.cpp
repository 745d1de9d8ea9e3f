// Routing policy: the exact replica chosen for scripted loads (ties rotate from the last
// winner + 1), round robin, prefix affinity within/over the slack; the load book's arithmetic
// (routed-not-queued requests count in full, progress and finishes reduce it); the prefix index.
#include <gtest/gtest.h>

#include "core/error.h"
#include "parallel/load_book.h"
#include "parallel/prefix_index.h"
#include "parallel/router.h"

namespace pypto {
namespace {

std::vector<ReplicaLoad> loads(std::vector<int64_t> pending, std::vector<int64_t> prefix = {}) {
  std::vector<ReplicaLoad> v(pending.size());
  for (size_t i = 0; i < v.size(); ++i) {
    v[i].pending_tokens = pending[i];
    if (!prefix.empty()) v[i].cached_prefix_tokens = prefix[i];
  }
  return v;
}

TEST(Router, LeastPendingTokensPicksTheMinimum) {
  Router r(RoutingPolicy::LeastPendingTokens, 3);
  EXPECT_EQ(r.choose(loads({30, 10, 20})), 1);
  EXPECT_EQ(r.choose(loads({5, 10, 20})), 0);
  EXPECT_EQ(r.choose(loads({50, 10, 9})), 2);
}

TEST(Router, TiesRotateFromTheLastWinner) {
  Router r(RoutingPolicy::LeastPendingTokens, 4);
  // All idle: 0, 1, 2, 3, 0 — the seed's rotating counter.
  EXPECT_EQ(r.choose(loads({0, 0, 0, 0})), 0);
  EXPECT_EQ(r.choose(loads({0, 0, 0, 0})), 1);
  EXPECT_EQ(r.choose(loads({0, 0, 0, 0})), 2);
  EXPECT_EQ(r.choose(loads({0, 0, 0, 0})), 3);
  EXPECT_EQ(r.choose(loads({0, 0, 0, 0})), 0);
  // Tie between 0 and 2 after winner 0: the first tied at or after 1 is 2.
  EXPECT_EQ(r.choose(loads({7, 9, 7, 9})), 2);
  // Tie between 0 and 1 after winner 2: wraps to 0.
  EXPECT_EQ(r.choose(loads({7, 7, 9, 9})), 0);
  EXPECT_EQ(r.choose(loads({7, 7, 9, 9})), 1);
}

TEST(Router, RoundRobinIgnoresLoad) {
  Router r(RoutingPolicy::RoundRobin, 3);
  EXPECT_EQ(r.choose(loads({0, 100, 100})), 0);
  EXPECT_EQ(r.choose(loads({0, 100, 100})), 1);
  EXPECT_EQ(r.choose(loads({0, 100, 100})), 2);
  EXPECT_EQ(r.choose(loads({0, 100, 100})), 0);
}

TEST(Router, PrefixAffinityWithinTheSlack) {
  Router r(RoutingPolicy::PrefixAffinity, 3, /*slack=*/100);
  // Replica 2 holds 64 cached tokens and is 100 above the least loaded: still within the slack.
  EXPECT_EQ(r.choose(loads({0, 50, 100}, {0, 32, 64})), 2);
  // 101 above: over the slack, least pending tokens wins.
  EXPECT_EQ(r.choose(loads({0, 50, 101}, {0, 32, 64})), 0);
  // No replica holds any of the prompt: least pending tokens.
  EXPECT_EQ(r.choose(loads({9, 3, 5}, {0, 0, 0})), 1);
  // Two replicas hold the same longest prefix: the less loaded of them.
  EXPECT_EQ(r.choose(loads({0, 40, 30}, {0, 64, 64})), 2);
  // ... and on equal load the rotation decides (last winner 2 -> 1 comes before 2 from 0).
  EXPECT_EQ(r.choose(loads({0, 30, 30}, {0, 64, 64})), 1);
}

TEST(Router, PolicyNames) {
  EXPECT_EQ(parse_routing_policy("least_pending_tokens"), RoutingPolicy::LeastPendingTokens);
  EXPECT_EQ(parse_routing_policy("round_robin"), RoutingPolicy::RoundRobin);
  EXPECT_EQ(parse_routing_policy("prefix_affinity"), RoutingPolicy::PrefixAffinity);
  try {
    parse_routing_policy("random");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--data-parallel-routing 'random': expected least_pending_tokens, round_robin or prefix_affinity");
  }
}

TEST(LoadBook, RemainingTokens) {
  // 10-token prompt, 5 new tokens.
  EXPECT_EQ(LoadBook::remaining(10, 5, 0), 15);   // routed, not queued yet: in full
  EXPECT_EQ(LoadBook::remaining(10, 5, 6), 9);    // 6 prompt tokens prefilled (a chunk)
  EXPECT_EQ(LoadBook::remaining(10, 5, 10), 4);   // prompt done, first token sampled
  EXPECT_EQ(LoadBook::remaining(10, 5, 13), 1);   // 4 generated
  EXPECT_EQ(LoadBook::remaining(10, 5, 14), 0);   // 5 generated
}

TEST(LoadBook, RoutedProgressFinishedAndRemoved) {
  LoadBook b;
  b.add("a", 1, 10, 5);
  b.add("b", 2, 4, 3);  // two sequences: b\x1f0, b\x1f1
  EXPECT_EQ(b.pending_tokens(), 15 + 2 * 7);
  b.on_computed("a", 10);
  EXPECT_EQ(b.pending_tokens(), 4 + 14);
  b.on_computed(std::string("b") + LoadBook::kSequenceSeparator + "1", 4);
  EXPECT_EQ(b.pending_tokens(), 4 + 7 + 2);
  b.on_finished("a");
  EXPECT_EQ(b.pending_tokens(), 9);
  b.on_computed("unknown", 3);  // ignored
  b.on_computed(std::string("b") + LoadBook::kSequenceSeparator + "7", 3);  // no such sequence
  EXPECT_EQ(b.pending_tokens(), 9);
  EXPECT_EQ(b.num_requests(), 2u);
  b.remove("b");
  b.remove("a");
  EXPECT_EQ(b.pending_tokens(), 0);
  EXPECT_EQ(b.num_requests(), 0u);
}

TEST(PrefixIndex, LongestIndexedPrefixInWholeBlocks) {
  PrefixIndex idx(4, 100);
  std::vector<int32_t> p = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  EXPECT_EQ(idx.match(p), 0);
  idx.insert(p);
  EXPECT_EQ(idx.size(), 2u);  // two full blocks; the partial one is not cached
  EXPECT_EQ(idx.match(p), 8);
  EXPECT_EQ(idx.match({1, 2, 3, 4, 5, 6, 7, 0, 9}), 4);  // diverges in the second block
  EXPECT_EQ(idx.match({0, 2, 3, 4, 5, 6, 7, 8}), 0);     // a block's hash names its whole prefix
}

TEST(PrefixIndex, EvictsLeastRecentlyUsedKeepingPrefixHeads) {
  PrefixIndex idx(2, 3);
  idx.insert({1, 1, 2, 2});  // blocks A, AB
  idx.insert({3, 3, 4, 4});  // blocks C, CD: over the cap, the oldest (AB, the deeper one) goes
  EXPECT_EQ(idx.size(), 3u);
  EXPECT_EQ(idx.match({1, 1, 2, 2}), 2);
  EXPECT_EQ(idx.match({3, 3, 4, 4}), 4);
}

}  // namespace
}  // namespace pypto
