#include <gtest/gtest.h>

#include <memory>

#include "engine/kv_cache_manager.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;

std::unique_ptr<Request> make_request(const std::string& id, Ids prompt) {
  return std::make_unique<Request>(id, std::move(prompt), SamplingParams{}, Ids{}, 0);
}

Ids range(int32_t from, int32_t to) {
  Ids out;
  for (int32_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

// Schedules `n` new tokens (after any prefix hit) and pretends the model computed them.
Ids admit_and_compute(KVCacheManager& kv, Request& r) {
  ComputedBlocks hit = kv.get_computed_blocks(r);
  auto ids = kv.allocate_slots(r, r.num_tokens() - hit.num_computed_tokens, &hit);
  EXPECT_TRUE(ids.has_value());
  r.num_computed_tokens = r.num_tokens();
  kv.cache_blocks(r);
  return ids.value_or(Ids{});
}

TEST(KVCacheManager, AllocateCacheAndHitAPrefix) {
  KVCacheManager kv(10, 4, true);
  auto r1 = make_request("r1", range(0, 10));  // blocks: [0..3] [4..7] [8 9]
  ComputedBlocks hit = kv.get_computed_blocks(*r1);
  EXPECT_EQ(hit.num_computed_tokens, 0);
  EXPECT_EQ(kv.allocate_slots(*r1, 10, &hit), (Ids{0, 1, 2}));
  // Nothing is published before the KV is computed.
  EXPECT_EQ(kv.block_pool().num_cached_blocks(), 0u);
  r1->num_computed_tokens = 10;
  kv.cache_blocks(*r1);
  EXPECT_EQ(kv.block_pool().num_cached_blocks(), 2u);  // the partial block stays private
  EXPECT_EQ(r1->block_hashes.size(), 2u);

  // Same first 8 tokens, different tail: hits blocks 0 and 1.
  Ids p2 = range(0, 8);
  p2.insert(p2.end(), {50, 51, 52});
  auto r2 = make_request("r2", p2);
  hit = kv.get_computed_blocks(*r2);
  EXPECT_EQ(hit.num_computed_tokens, 8);
  ASSERT_EQ(hit.blocks.size(), 2u);
  EXPECT_EQ(hit.blocks[0]->block_id, 0);
  EXPECT_EQ(hit.blocks[1]->block_id, 1);
  EXPECT_EQ(kv.allocate_slots(*r2, 3, &hit), (Ids{3}));
  EXPECT_EQ(kv.block_ids("r2"), (Ids{0, 1, 3}));
  EXPECT_EQ(kv.block_pool().block(0).ref_cnt, 2);
  EXPECT_EQ(kv.block_pool().block(1).ref_cnt, 2);
  EXPECT_EQ(kv.block_pool().block(2).ref_cnt, 1);
  EXPECT_EQ(kv.block_pool().block(3).ref_cnt, 1);
  EXPECT_EQ(kv.block_pool().free_block_ids(), (Ids{4, 5, 6, 7, 8, 9}));

  // Freeing r1 releases only its private block 2; shared blocks stay held by r2.
  kv.free(*r1);
  EXPECT_EQ(kv.block_pool().block(0).ref_cnt, 1);
  EXPECT_EQ(kv.block_pool().free_block_ids(), (Ids{4, 5, 6, 7, 8, 9, 2}));
  // r2 frees in reverse: 3, then 1, then 0 reach the tail in that order.
  kv.free(*r2);
  EXPECT_EQ(kv.block_pool().free_block_ids(), (Ids{4, 5, 6, 7, 8, 9, 2, 3, 1, 0}));
  EXPECT_EQ(kv.num_requests(), 0u);

  // A later request revives the free cached blocks 0 and 1 out of the middle of the queue.
  auto r3 = make_request("r3", range(0, 9));
  EXPECT_EQ(admit_and_compute(kv, *r3), (Ids{4}));
  EXPECT_EQ(kv.block_ids("r3"), (Ids{0, 1, 4}));
  EXPECT_EQ(kv.block_pool().free_block_ids(), (Ids{5, 6, 7, 8, 9, 2, 3}));
}

TEST(KVCacheManager, FullPromptHitStillComputesTheLastToken) {
  KVCacheManager kv(10, 4, true);
  auto r1 = make_request("r1", range(0, 8));
  admit_and_compute(kv, *r1);
  EXPECT_EQ(kv.block_pool().num_cached_blocks(), 2u);
  auto r2 = make_request("r2", range(0, 8));
  ComputedBlocks hit = kv.get_computed_blocks(*r2);
  EXPECT_EQ(hit.num_computed_tokens, 4);  // not 8: token 7 must run through the model
  ASSERT_EQ(hit.blocks.size(), 1u);
  EXPECT_EQ(hit.blocks[0]->block_id, 0);
  EXPECT_EQ(kv.allocate_slots(*r2, 4, &hit), (Ids{2}));
}

TEST(KVCacheManager, EvictionDropsTheHashAndLaterLookupsMiss) {
  KVCacheManager kv(4, 4, true);
  auto r1 = make_request("r1", range(0, 9));
  EXPECT_EQ(admit_and_compute(kv, *r1), (Ids{0, 1, 2}));
  kv.free(*r1);
  EXPECT_EQ(kv.block_pool().free_block_ids(), (Ids{3, 2, 1, 0}));
  // 12 unrelated tokens take blocks 3, 2, 1: block 1 (r1's second block) is evicted.
  auto r2 = make_request("r2", range(100, 112));
  EXPECT_EQ(admit_and_compute(kv, *r2), (Ids{3, 2, 1}));
  EXPECT_EQ(kv.block_pool().num_cached_blocks(), 1u + 3u);  // r1's block 0, r2's three
  auto r3 = make_request("r3", range(0, 9));
  ComputedBlocks hit = kv.get_computed_blocks(*r3);
  EXPECT_EQ(hit.num_computed_tokens, 4);  // block 0 only
}

TEST(KVCacheManager, AllocationFailureChangesNothing) {
  KVCacheManager kv(3, 4, true);
  auto r1 = make_request("r1", range(0, 8));
  EXPECT_EQ(admit_and_compute(kv, *r1), (Ids{0, 1}));
  auto r2 = make_request("r2", range(20, 29));  // needs 3 blocks, 1 free
  ComputedBlocks hit = kv.get_computed_blocks(*r2);
  EXPECT_FALSE(kv.allocate_slots(*r2, 9, &hit).has_value());
  EXPECT_EQ(kv.block_ids("r2"), Ids{});
  EXPECT_EQ(kv.block_pool().free_block_ids(), (Ids{2}));
  // Growing r1 by one token needs block 2.
  r1->append_output_token(5);
  EXPECT_EQ(kv.allocate_slots(*r1, 1), (Ids{2}));
  EXPECT_EQ(kv.allocate_slots(*r1, 3), Ids{});  // fits in block 2
}

TEST(KVCacheManager, HitBlocksInTheFreeQueueCountAgainstFreeSpace) {
  KVCacheManager kv(3, 4, true);
  auto r1 = make_request("r1", range(0, 8));
  admit_and_compute(kv, *r1);
  kv.free(*r1);  // blocks 1, 0 free but cached; block 2 free
  auto r2 = make_request("r2", range(0, 16));  // hits 0 and 1, needs 2 more: only block 2
  ComputedBlocks hit = kv.get_computed_blocks(*r2);
  EXPECT_EQ(hit.num_computed_tokens, 8);
  EXPECT_FALSE(kv.allocate_slots(*r2, 8, &hit).has_value());
  EXPECT_EQ(kv.block_pool().free_block_ids(), (Ids{2, 1, 0}));
  EXPECT_EQ(kv.allocate_slots(*r2, 4, &hit), (Ids{2}));
  EXPECT_EQ(kv.block_ids("r2"), (Ids{0, 1, 2}));
}

TEST(KVCacheManager, ForcedHashCollisionReturnsNoWrongBlocks) {
  // Every block hashes to the same value: only the token and parent checks separate them.
  BlockHasher constant = [](const BlockHash*, std::span<const int32_t>) { return BlockHash{}; };
  KVCacheManager kv(20, 4, true, constant);
  auto r1 = make_request("r1", Ids{1, 2, 3, 4, 5, 6, 7, 8, 9});
  admit_and_compute(kv, *r1);
  // Different first block, same second block: neither may hit (block 1's KV depends on block 0).
  auto r2 = make_request("r2", Ids{9, 9, 9, 9, 5, 6, 7, 8, 9});
  EXPECT_EQ(kv.get_computed_blocks(*r2).num_computed_tokens, 0);
  // A block equal to r1's first block, but at position 1: its parent differs.
  auto r3 = make_request("r3", Ids{1, 2, 3, 4, 1, 2, 3, 4, 9});
  ComputedBlocks hit = kv.get_computed_blocks(*r3);
  EXPECT_EQ(hit.num_computed_tokens, 4);
  EXPECT_EQ(hit.blocks[0]->block_id, 0);
  // The true prefix still hits in full.
  auto r4 = make_request("r4", Ids{1, 2, 3, 4, 5, 6, 7, 8, 0});
  hit = kv.get_computed_blocks(*r4);
  EXPECT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(hit.blocks[1]->block_id, 1);
}

TEST(KVCacheManager, Sha256ChainDependsOnParentAndTokens) {
  const Ids a = {1, 2, 3, 4}, b = {1, 2, 3, 5};
  const BlockHash h0 = sha256_block_hash(nullptr, a);
  EXPECT_EQ(h0, sha256_block_hash(nullptr, a));
  EXPECT_NE(h0, sha256_block_hash(nullptr, b));
  EXPECT_NE(sha256_block_hash(&h0, a), h0);
  // SHA-256 of 32 zero bytes followed by int32 LE 1,2,3,4 (computed with Python's hashlib).
  const uint8_t expect_first_bytes[4] = {0xd8, 0xfa, 0xa8, 0xec};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(h0.bytes[size_t(i)], expect_first_bytes[i]) << i;
}

TEST(KVCacheManager, PrefixCachingOffNeverHits) {
  KVCacheManager kv(10, 4, false);
  auto r1 = make_request("r1", range(0, 9));
  admit_and_compute(kv, *r1);
  EXPECT_EQ(kv.block_pool().num_cached_blocks(), 0u);
  auto r2 = make_request("r2", range(0, 9));
  EXPECT_EQ(kv.get_computed_blocks(*r2).num_computed_tokens, 0);
}

TEST(KVCacheManager, BlocksPublishedAsChunksComplete) {
  KVCacheManager kv(10, 4, true);
  auto r1 = make_request("r1", range(0, 10));
  ComputedBlocks hit = kv.get_computed_blocks(*r1);
  EXPECT_EQ(kv.allocate_slots(*r1, 6, &hit), (Ids{0, 1}));
  r1->num_computed_tokens = 6;
  kv.cache_blocks(*r1);
  EXPECT_EQ(kv.block_pool().num_cached_blocks(), 1u);
  EXPECT_EQ(kv.allocate_slots(*r1, 4), (Ids{2}));
  r1->num_computed_tokens = 10;
  kv.cache_blocks(*r1);
  EXPECT_EQ(kv.block_pool().num_cached_blocks(), 2u);
  EXPECT_EQ(kv.block_pool().block(1).parent, &kv.block_pool().block(0));
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

TEST(KVCacheManager, HitsFollowChildrenOfDuplicateParents) {
  // Two requests compute the same first block in the same step: both copies are published, and
  // each request's second block hangs off its own copy. A later request with r2's prompt must
  // still hit both of r2's blocks, whichever copy of the first block the lookup finds first.
  KVCacheManager kv(10, 4, true);
  auto r1 = make_request("r1", Ids{1, 2, 3, 4, 5, 6, 7, 8, 0});
  auto r2 = make_request("r2", Ids{1, 2, 3, 4, 9, 9, 9, 9, 0});
  ComputedBlocks h1 = kv.get_computed_blocks(*r1);
  ComputedBlocks h2 = kv.get_computed_blocks(*r2);
  EXPECT_EQ(kv.allocate_slots(*r1, 9, &h1), (Ids{0, 1, 2}));
  EXPECT_EQ(kv.allocate_slots(*r2, 9, &h2), (Ids{3, 4, 5}));
  r1->num_computed_tokens = 9;
  r2->num_computed_tokens = 9;
  kv.cache_blocks(*r1);
  kv.cache_blocks(*r2);
  EXPECT_EQ(kv.block_pool().num_cached_blocks(), 4u);
  auto r3 = make_request("r3", Ids{1, 2, 3, 4, 9, 9, 9, 9, 5});
  ComputedBlocks hit = kv.get_computed_blocks(*r3);
  EXPECT_EQ(hit.num_computed_tokens, 8);
  ASSERT_EQ(hit.blocks.size(), 2u);
  EXPECT_EQ(hit.blocks[1]->block_id, 4);
  // The first block may be either copy: both hold [1 2 3 4] at positions 0-3.
  EXPECT_TRUE(hit.blocks[0]->block_id == 0 || hit.blocks[0]->block_id == 3);
  // With a constant hasher the same holds.
  BlockHasher constant = [](const BlockHash*, std::span<const int32_t>) { return BlockHash{}; };
  KVCacheManager kc(10, 4, true, constant);
  auto c1 = make_request("c1", Ids{1, 2, 3, 4, 5, 6, 7, 8, 0});
  auto c2 = make_request("c2", Ids{1, 2, 3, 4, 9, 9, 9, 9, 0});
  ComputedBlocks g1 = kc.get_computed_blocks(*c1);
  ComputedBlocks g2 = kc.get_computed_blocks(*c2);
  kc.allocate_slots(*c1, 9, &g1);
  kc.allocate_slots(*c2, 9, &g2);
  c1->num_computed_tokens = c2->num_computed_tokens = 9;
  kc.cache_blocks(*c1);
  kc.cache_blocks(*c2);
  auto c3 = make_request("c3", Ids{1, 2, 3, 4, 9, 9, 9, 9, 5});
  hit = kc.get_computed_blocks(*c3);
  ASSERT_EQ(hit.blocks.size(), 2u);
  EXPECT_EQ(hit.blocks[1]->block_id, 4);
  auto c4 = make_request("c4", Ids{1, 2, 3, 4, 9, 9, 9, 8, 5});
  EXPECT_EQ(kc.get_computed_blocks(*c4).num_computed_tokens, 4);
}

}  // namespace
}  // namespace pypto
