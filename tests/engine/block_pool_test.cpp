#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/block_pool.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;

Ids ids_of(const std::vector<KVCacheBlock*>& blocks) {
  Ids out;
  for (const KVCacheBlock* b : blocks) out.push_back(b->block_id);
  return out;
}

BlockHash hash_of(uint8_t v) {
  BlockHash h;
  h.bytes.fill(v);
  return h;
}

TEST(BlockPool, StartsWithAllBlocksFreeInIdOrder) {
  BlockPool pool(5, true);
  EXPECT_EQ(pool.num_free_blocks(), 5);
  EXPECT_EQ(pool.free_block_ids(), (Ids{0, 1, 2, 3, 4}));
  EXPECT_DOUBLE_EQ(pool.usage(), 0.0);
}

TEST(BlockPool, AllocateFromHeadFreeToTailInGivenOrder) {
  BlockPool pool(6, true);
  auto a = pool.get_new_blocks(3);
  EXPECT_EQ(ids_of(a), (Ids{0, 1, 2}));
  for (auto* b : a) EXPECT_EQ(b->ref_cnt, 1);
  EXPECT_EQ(pool.free_block_ids(), (Ids{3, 4, 5}));
  // Freed in reverse (as KVCacheManager does): the sequence's tail is evicted first.
  std::vector<KVCacheBlock*> rev(a.rbegin(), a.rend());
  pool.free_blocks(rev);
  EXPECT_EQ(pool.free_block_ids(), (Ids{3, 4, 5, 2, 1, 0}));
  for (auto* b : a) EXPECT_EQ(b->ref_cnt, 0);
}

TEST(BlockPool, TouchRemovesFromTheMiddleOfTheFreeQueue) {
  BlockPool pool(5, true);
  auto a = pool.get_new_blocks(5);
  pool.free_blocks(a);
  KVCacheBlock* b2 = a[2];
  pool.touch(std::vector<KVCacheBlock*>{b2});
  EXPECT_EQ(b2->ref_cnt, 1);
  EXPECT_EQ(pool.free_block_ids(), (Ids{0, 1, 3, 4}));
  pool.touch(std::vector<KVCacheBlock*>{b2});  // a second holder: no queue change
  EXPECT_EQ(b2->ref_cnt, 2);
  pool.free_blocks(std::vector<KVCacheBlock*>{b2});
  EXPECT_EQ(b2->ref_cnt, 1);
  EXPECT_EQ(pool.free_block_ids(), (Ids{0, 1, 3, 4}));
  pool.free_blocks(std::vector<KVCacheBlock*>{b2});
  EXPECT_EQ(pool.free_block_ids(), (Ids{0, 1, 3, 4, 2}));
}

TEST(BlockPool, CachedBlockVerifiedByTokensAndParent) {
  BlockPool pool(4, true);
  auto a = pool.get_new_blocks(2);
  const Ids t0 = {1, 2}, t1 = {3, 4};
  pool.cache_full_block(a[0], hash_of(1), t0, nullptr);
  pool.cache_full_block(a[1], hash_of(2), t1, a[0]);
  EXPECT_EQ(pool.num_cached_blocks(), 2u);
  EXPECT_EQ(pool.find_cached_block(hash_of(1), t0, nullptr), a[0]);
  EXPECT_EQ(pool.find_cached_block(hash_of(2), t1, a[0]), a[1]);
  // Same hash, other tokens: a collision must not hit.
  EXPECT_EQ(pool.find_cached_block(hash_of(1), Ids{1, 9}, nullptr), nullptr);
  // Right tokens after a different parent: not the same KV.
  EXPECT_EQ(pool.find_cached_block(hash_of(2), t1, nullptr), nullptr);
  EXPECT_EQ(pool.find_cached_block(hash_of(2), t1, a[1]), nullptr);
  EXPECT_EQ(pool.find_cached_block(hash_of(3), t0, nullptr), nullptr);
}

TEST(BlockPool, FreedCachedBlocksStayFindableUntilEvicted) {
  BlockPool pool(3, true);
  auto a = pool.get_new_blocks(2);
  const Ids t0 = {1, 2}, t1 = {3, 4};
  pool.cache_full_block(a[0], hash_of(1), t0, nullptr);
  pool.cache_full_block(a[1], hash_of(2), t1, a[0]);
  pool.free_blocks(std::vector<KVCacheBlock*>{a[1], a[0]});
  EXPECT_EQ(pool.free_block_ids(), (Ids{2, 1, 0}));
  EXPECT_EQ(pool.find_cached_block(hash_of(1), t0, nullptr), a[0]);
  // Two allocations: block 2 (never cached) then block 1, whose hash is evicted.
  auto b = pool.get_new_blocks(2);
  EXPECT_EQ(ids_of(b), (Ids{2, 1}));
  EXPECT_EQ(pool.num_cached_blocks(), 1u);
  EXPECT_FALSE(a[1]->block_hash.has_value());
  EXPECT_EQ(pool.find_cached_block(hash_of(2), t1, a[0]), nullptr);
  EXPECT_EQ(pool.find_cached_block(hash_of(1), t0, nullptr), a[0]);
}

TEST(BlockPool, ReusedParentInvalidatesItsChildren) {
  BlockPool pool(3, true);
  auto a = pool.get_new_blocks(2);
  const Ids t0 = {1, 2}, t1 = {3, 4};
  pool.cache_full_block(a[0], hash_of(1), t0, nullptr);
  pool.cache_full_block(a[1], hash_of(2), t1, a[0]);
  pool.free_blocks(std::vector<KVCacheBlock*>{a[0], a[1]});  // block 0 evicted first
  auto b = pool.get_new_blocks(2);                            // 2, then 0 (reused)
  EXPECT_EQ(ids_of(b), (Ids{2, 0}));
  // Block 0 now holds other KV; republished with the same tokens it is a new generation, and
  // block 1 (computed after the old block 0) must not be reachable through it.
  pool.cache_full_block(b[1], hash_of(1), t0, nullptr);
  EXPECT_EQ(pool.find_cached_block(hash_of(1), t0, nullptr), b[1]);
  EXPECT_EQ(pool.find_cached_block(hash_of(2), t1, b[1]), nullptr);
}

TEST(BlockPool, DuplicateHashesAreKeptAndRemovedByIdentity) {
  BlockPool pool(3, true);
  auto a = pool.get_new_blocks(2);
  const Ids t = {7, 7};
  pool.cache_full_block(a[0], hash_of(5), t, nullptr);
  pool.cache_full_block(a[1], hash_of(5), t, nullptr);  // not de-duplicated
  EXPECT_EQ(pool.num_cached_blocks(), 2u);
  pool.free_blocks(std::vector<KVCacheBlock*>{a[1]});
  auto b = pool.get_new_blocks(2);  // 2, then 1: evicts block 1's entry only
  EXPECT_EQ(ids_of(b), (Ids{2, 1}));
  EXPECT_EQ(pool.num_cached_blocks(), 1u);
  EXPECT_EQ(pool.find_cached_block(hash_of(5), t, nullptr), a[0]);
}

TEST(BlockPool, CachingDisabledPublishesNothing) {
  BlockPool pool(2, false);
  auto a = pool.get_new_blocks(1);
  pool.cache_full_block(a[0], hash_of(1), Ids{1}, nullptr);
  EXPECT_EQ(pool.num_cached_blocks(), 0u);
  EXPECT_EQ(pool.find_cached_block(hash_of(1), Ids{1}, nullptr), nullptr);
}

TEST(BlockPool, ResetPrefixCacheOnlyWhenAllFree) {
  BlockPool pool(2, true);
  auto a = pool.get_new_blocks(1);
  pool.cache_full_block(a[0], hash_of(1), Ids{1}, nullptr);
  EXPECT_FALSE(pool.reset_prefix_cache());
  pool.free_blocks(a);
  EXPECT_TRUE(pool.reset_prefix_cache());
  EXPECT_EQ(pool.num_cached_blocks(), 0u);
  EXPECT_EQ(pool.find_cached_block(hash_of(1), Ids{1}, nullptr), nullptr);
}

TEST(BlockPool, RejectsEmptyPool) { EXPECT_THROW({ BlockPool p(0, true); }, Error); }

}  // namespace
}  // namespace pypto
