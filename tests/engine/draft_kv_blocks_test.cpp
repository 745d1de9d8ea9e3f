// The draft model's KV blocks and prefix cache (engine/draft_kv_blocks.h), without a model: what
// gets published (verified tokens' full blocks only), what a new sequence restores, that restored
// blocks are held (never handed out again while in use) and that eviction drops hashes.
#include "engine/draft_kv_blocks.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;

Ids iota(int32_t n, int32_t from = 100) {
  Ids v(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) v[size_t(i)] = from + i;
  return v;
}

// A sequence holding `fed` tokens' KV (blocks reserved, nothing published yet).
DraftKvBlocks::Seq fill(DraftKvBlocks& kv, const Ids& fed) {
  DraftKvBlocks::Seq s;
  EXPECT_EQ(kv.restore(s, fed, 0, {}), 0);
  EXPECT_TRUE(kv.reserve(s, int64_t(fed.size())));
  return s;
}

// The draft fed 6 verified tokens and then 4 drafts, the target rejected the first of them: only
// the block of verified tokens (0..3) is published, not the one holding token 4, 5 and two drafts
// (4..7), even with the request's verified tokens covering it and any limit. A sequence whose
// tokens are the fed ones (drafts and all) restores just that block.
TEST(DraftKvBlocks, OnlyBlocksOfVerifiedTokensArePublished) {
  DraftKvBlocks kv(16, 4, true);
  // The target's tokens since (7 where the draft said 50, then the request went on).
  const Ids verified = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  const Ids fed = {1, 2, 3, 4, 5, 6, 50, 51, 52, 53};
  DraftKvBlocks::Seq s = fill(kv, fed);
  kv.publish(s, fed, verified, 100, {});
  EXPECT_EQ(s.num_cached, 1u);
  EXPECT_EQ(kv.num_cached_blocks(), 1u);
  kv.release(s);

  DraftKvBlocks::Seq probe;
  EXPECT_EQ(kv.restore(probe, Ids{1, 2, 3, 4, 5, 6, 50, 51, 52, 53, 9}, 10, {}), 4);
  kv.release(probe);
  DraftKvBlocks::Seq other;
  EXPECT_EQ(kv.restore(other, Ids{9, 2, 3, 4, 5}, 4, {}), 0) << "another first token: another chain";
  kv.release(other);
}

// The limit (all but the request's last token, while it still drafts) caps what is published.
TEST(DraftKvBlocks, PublishingStopsAtTheLimit) {
  DraftKvBlocks kv(16, 4, true);
  const Ids t = iota(12);
  DraftKvBlocks::Seq s = fill(kv, t);
  kv.publish(s, t, t, 11, {});
  EXPECT_EQ(s.num_cached, 2u);
  kv.publish(s, t, t, 12, {});
  EXPECT_EQ(s.num_cached, 3u);
  EXPECT_EQ(kv.cached_tokens(s), 12);
}

// Restored blocks are held by the sequence: a pool that hands out every free block never hands
// out one of them, and the restored ids come first in the sequence's table. The restore never
// goes past max_tokens (whole blocks) and uses the request's own hashes where given.
TEST(DraftKvBlocks, RestoredBlocksAreHeldAndComeFirst) {
  DraftKvBlocks kv(8, 4, true);
  const Ids t = iota(16);
  DraftKvBlocks::Seq a = fill(kv, t);
  kv.publish(a, t, t, 16, {});
  const std::vector<BlockHash> hashes = a.hashes;
  const Ids a_ids = a.ids;
  kv.release(a);
  EXPECT_EQ(kv.free_blocks(), 8);

  DraftKvBlocks::Seq b;
  EXPECT_EQ(kv.restore(b, t, 11, hashes), 8) << "two whole blocks below 11 tokens";
  EXPECT_EQ(b.ids, Ids(a_ids.begin(), a_ids.begin() + 2));
  EXPECT_EQ(kv.free_blocks(), 6);
  DraftKvBlocks::Seq c;
  ASSERT_TRUE(kv.reserve(c, 6 * 4));
  for (int32_t id : c.ids) EXPECT_EQ(std::count(b.ids.begin(), b.ids.end(), id), 0) << "block " << id;
  EXPECT_FALSE(kv.reserve(c, 7 * 4)) << "the pool is empty";
  kv.release(b);
  kv.release(c);
  EXPECT_EQ(kv.free_blocks(), 8);
}

// Eviction: a pool of 4 blocks, a published chain of 3, then a sequence that needs all 4 blocks
// evicts the chain (least recently used first); nothing is restored afterwards.
TEST(DraftKvBlocks, ReusingAFreedCachedBlockEvictsIt) {
  DraftKvBlocks kv(4, 4, true);
  const Ids t = iota(12);
  DraftKvBlocks::Seq a = fill(kv, t);
  kv.publish(a, t, t, 12, {});
  kv.release(a);
  EXPECT_EQ(kv.num_cached_blocks(), 3u);
  DraftKvBlocks::Seq b = fill(kv, iota(16, 500));
  EXPECT_EQ(kv.num_cached_blocks(), 0u);
  kv.release(b);
  DraftKvBlocks::Seq c;
  EXPECT_EQ(kv.restore(c, t, 12, {}), 0);
}

// Without prefix caching nothing is published or restored.
TEST(DraftKvBlocks, OffMeansNoCache) {
  DraftKvBlocks kv(8, 4, false);
  const Ids t = iota(12);
  DraftKvBlocks::Seq a = fill(kv, t);
  kv.publish(a, t, t, 12, {});
  EXPECT_EQ(kv.num_cached_blocks(), 0u);
  kv.release(a);
  DraftKvBlocks::Seq b;
  EXPECT_EQ(kv.restore(b, t, 12, {}), 0);
  EXPECT_EQ(kv.hit_tokens(), 0);
}

}  // namespace
}  // namespace pypto
