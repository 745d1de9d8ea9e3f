// The engine-side index of recurrent-state snapshots (engine/state_snapshots.h) and the prefix
// cache cut back to them (KVCacheManager with state snapshots): which boundaries a step saves,
// how saves become findable, tied to and dying with their blocks, the LRU budget, pins, and a hit
// that ends only where a snapshot exists.
#include "engine/state_snapshots.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/engine_config.h"
#include "engine/kv_cache_manager.h"

namespace pypto {
namespace {

std::vector<int64_t> positions(const std::vector<StateSave>& saves) {
  std::vector<int64_t> out;
  for (const StateSave& v : saves) out.push_back(v.position);
  return out;
}

// Publishes blocks[0..n) of a fake sequence whose tokens are block index * 100 + offset.
void publish(BlockPool& pool, const std::vector<KVCacheBlock*>& blocks, int32_t bs, uint8_t salt = 0) {
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::vector<int32_t> tokens(size_t(bs), int32_t(i) * 100 + salt);
    BlockHash h;
    h.bytes[0] = uint8_t(i);
    h.bytes[1] = salt;
    pool.cache_full_block(blocks[i], h, tokens, i == 0 ? nullptr : blocks[i - 1]);
  }
}

TEST(StateSnapshots, PlansTheLastBoundaryAndTheInterval) {
  BlockPool pool(8, true);
  StateSnapshots s(pool, 16, 4, 8);
  EXPECT_EQ(positions(s.plan(0, 3)), std::vector<int64_t>{});            // no boundary reached
  EXPECT_EQ(positions(s.plan(0, 10)), (std::vector<int64_t>{8}));        // interval = last boundary
  EXPECT_EQ(positions(s.plan(0, 13)), (std::vector<int64_t>{8, 12}));    // interval, then the last
  EXPECT_EQ(positions(s.plan(3, 22)), (std::vector<int64_t>{8, 16, 24}));
  EXPECT_EQ(positions(s.plan(11, 1)), (std::vector<int64_t>{12}));       // a decode reaching a boundary
  EXPECT_EQ(positions(s.plan(12, 1)), std::vector<int64_t>{});           // one leaving it
  StateSnapshots ends_only(pool, 16, 4, 0);
  EXPECT_EQ(positions(ends_only.plan(0, 13)), (std::vector<int64_t>{12}));
}

TEST(StateSnapshots, CommittedSavesAreFoundUntilTheirBlockIsReused) {
  BlockPool pool(4, true);
  StateSnapshots s(pool, 4, 4, 0);
  std::vector<KVCacheBlock*> blocks = pool.get_new_blocks(3);
  const std::vector<StateSave> saves = s.plan(0, 12);
  ASSERT_EQ(saves.size(), 1u);
  EXPECT_EQ(s.find(*blocks[2]), -1);  // pending: not findable before the step is committed
  publish(pool, blocks, 4);
  s.commit("r", saves, blocks, 12);
  s.end_step();
  EXPECT_EQ(s.find(*blocks[2]), saves[0].entry);
  EXPECT_EQ(s.find(*blocks[1]), -1);
  EXPECT_EQ(s.num_valid(), 1);
  // The block is freed (still cached: the snapshot stays), then evicted and reused: stale.
  pool.free_blocks(std::vector<KVCacheBlock*>{blocks[2], blocks[1], blocks[0]});
  EXPECT_EQ(s.find(*blocks[2]), saves[0].entry);
  pool.get_new_blocks(4);
  EXPECT_EQ(s.find(*blocks[2]), -1);
  EXPECT_EQ(s.num_valid(), 0);
}

TEST(StateSnapshots, UncommittedSavesAreFreedAtTheEndOfTheStep) {
  BlockPool pool(4, true);
  StateSnapshots s(pool, 2, 4, 0);
  EXPECT_EQ(s.plan(0, 4).size(), 1u);
  EXPECT_EQ(s.plan(0, 4).size(), 1u);
  EXPECT_EQ(s.plan(0, 4).size(), 0u);  // both entries pending
  EXPECT_EQ(s.stats().skipped, 1);
  s.end_step();
  EXPECT_EQ(s.plan(0, 4).size(), 1u);
}

TEST(StateSnapshots, LeastRecentlyUsedGoesFirstAndPinnedNever) {
  BlockPool pool(8, true);
  StateSnapshots s(pool, 2, 4, 0);
  std::vector<KVCacheBlock*> a = pool.get_new_blocks(1), b = pool.get_new_blocks(1);
  publish(pool, a, 4, 1);
  publish(pool, b, 4, 2);
  const std::vector<StateSave> sa = s.plan(0, 4);
  s.commit("a", sa, a, 4);
  const std::vector<StateSave> sb = s.plan(0, 4);
  s.commit("b", sb, b, 4);
  s.end_step();
  s.pin(sa[0].entry);  // a is used (a hit): now b is the least recently used
  const std::vector<StateSave> sc = s.plan(0, 4);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].entry, sb[0].entry);
  EXPECT_EQ(s.stats().evicted, 1);
  EXPECT_EQ(s.find(*b[0]), -1);
  EXPECT_EQ(s.plan(0, 4).size(), 0u);  // a is pinned, the other pending
  EXPECT_EQ(s.find(*a[0]), sa[0].entry);
}

// Saves past the prompt replace the request's previous one: it is the first to be reused.
TEST(StateSnapshots, DecodeSavesReplaceEachOther) {
  BlockPool pool(8, true);
  StateSnapshots s(pool, 3, 4, 0);
  std::vector<KVCacheBlock*> blocks = pool.get_new_blocks(3);
  publish(pool, blocks, 4);
  const std::vector<StateSave> prompt = s.plan(0, 4);  // the prompt: 4 tokens
  s.commit("r", prompt, blocks, 4);
  const std::vector<StateSave> d1 = s.plan(7, 1);
  s.commit("r", d1, blocks, 4);
  const std::vector<StateSave> d2 = s.plan(11, 1);
  s.commit("r", d2, blocks, 4);
  s.end_step();
  // Entries: the prompt's (older) and d1 (replaced), d2. A new save takes d1's entry.
  const std::vector<StateSave> next = s.plan(0, 4);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].entry, d1[0].entry);
  EXPECT_EQ(s.find(*blocks[0]), prompt[0].entry);
  EXPECT_EQ(s.find(*blocks[2]), d2[0].entry);
}

// The cache manager: a hit ends at the last block a snapshot ends; none without snapshots.
TEST(StateSnapshots, HitsAreCutBackToTheLastSnapshot) {
  KVCacheManager kv(16, 4, true);
  kv.enable_state_snapshots(4, 8);
  std::vector<int32_t> ids;
  for (int i = 0; i < 20; ++i) ids.push_back(1000 + i);
  Request a("a", ids, SamplingParams{}, {}, 0);
  ASSERT_TRUE(kv.allocate_slots(a, 20).has_value());
  const std::vector<StateSave> saves = kv.plan_state_saves(a, 0, 20);
  EXPECT_EQ(positions(saves), (std::vector<int64_t>{8, 16, 20}));
  a.num_computed_tokens = 20;
  kv.cache_blocks(a);
  kv.commit_state_saves(a, saves);
  kv.end_state_step();
  // b shares 18 tokens: its verified chain is 4 blocks (16 tokens), a snapshot ends at 16.
  std::vector<int32_t> b_ids(ids.begin(), ids.begin() + 18);
  b_ids.push_back(7);
  b_ids.push_back(8);
  Request b("b", b_ids, SamplingParams{}, {}, 0);
  ComputedBlocks hit = kv.get_computed_blocks(b);
  EXPECT_EQ(hit.num_computed_tokens, 16);
  EXPECT_EQ(hit.state_entry, saves[1].entry);
  // c shares 14 tokens: 3 verified blocks (12 tokens), cut back to the snapshot at 8.
  std::vector<int32_t> c_ids(ids.begin(), ids.begin() + 14);
  c_ids.push_back(9);
  Request c("c", c_ids, SamplingParams{}, {}, 0);
  hit = kv.get_computed_blocks(c);
  EXPECT_EQ(hit.num_computed_tokens, 8);
  EXPECT_EQ(hit.state_entry, saves[0].entry);
  kv.record_prefix_cache_query(c.num_tokens(), hit.num_computed_tokens);  // c admitted
  EXPECT_EQ(kv.prefix_cache_stats().tokens_without_state, 4);

  KVCacheManager none(16, 4, true);
  none.enable_state_snapshots(0, 8);
  Request a2("a", ids, SamplingParams{}, {}, 0);
  ASSERT_TRUE(none.allocate_slots(a2, 20).has_value());
  a2.num_computed_tokens = 20;
  none.cache_blocks(a2);
  Request b2("b", b_ids, SamplingParams{}, {}, 0);
  EXPECT_EQ(none.get_computed_blocks(b2).num_computed_tokens, 0);
}

// --state-snapshots / --state-snapshot-interval: -1 is 64 blocks, anything else a multiple of
// the block size (0: none); a bad value is an Error naming the flag.
TEST(StateSnapshots, FlagsAreCheckedByName) {
  CacheConfig c;
  c.num_blocks = 8;
  c.block_size = 16;
  c.validate();
  EXPECT_EQ(c.snapshot_interval_tokens(), 64 * 16);
  c.state_snapshot_interval = 0;
  c.validate();
  EXPECT_EQ(c.snapshot_interval_tokens(), 0);
  auto message = [](const CacheConfig& bad) -> std::string {
    try {
      bad.validate();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  c.state_snapshot_interval = 24;
  EXPECT_NE(message(c).find("--state-snapshot-interval"), std::string::npos) << message(c);
  c.state_snapshot_interval = -2;
  EXPECT_NE(message(c).find("--state-snapshot-interval"), std::string::npos) << message(c);
  c.state_snapshot_interval = 32;
  c.state_snapshots = -1;
  EXPECT_NE(message(c).find("--state-snapshots"), std::string::npos) << message(c);
}

}  // namespace
}  // namespace pypto
