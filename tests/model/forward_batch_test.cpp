// ForwardBatch bookkeeping (slot mapping through block tables, per-sequence metadata, logits rows)
// and KvCache storage layout.
#include <gtest/gtest.h>

#include <cstdint>

#include "core/error.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"

namespace pypto {
namespace {

TEST(ForwardBatch, SlotsFollowTheBlockTable) {
  ForwardBatch b;
  b.max_blocks_per_seq = 4;
  const int32_t ids_a[5] = {10, 11, 12, 13, 14};
  const int32_t blocks_a[2] = {7, 2};  // positions 0-3 in block 7, 4-7 in block 2
  b.add_sequence(ids_a, 5, 0, blocks_a, 2, 4, ForwardBatch::Logits::Last);
  const int32_t ids_b[1] = {99};
  const int32_t blocks_b[3] = {5, 1, 3};
  b.add_sequence(ids_b, 1, 9, blocks_b, 3, 4, ForwardBatch::Logits::All);  // decode at position 9

  EXPECT_EQ(b.num_tokens(), 6);
  EXPECT_EQ(b.num_seqs(), 2);
  EXPECT_EQ(b.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 9}));
  EXPECT_EQ(b.slot_mapping, (std::vector<int64_t>{28, 29, 30, 31, 8, 3 * 4 + 1}));
  EXPECT_EQ(b.query_start, (std::vector<int32_t>{0, 5, 6}));
  EXPECT_EQ(b.context_len, (std::vector<int32_t>{5, 10}));
  EXPECT_EQ(b.block_tables, (std::vector<int32_t>{7, 2, 0, 0, 5, 1, 3, 0}));
  EXPECT_EQ(b.logits_indices, (std::vector<int32_t>{4, 5}));
  b.validate(/*num_cache_blocks=*/8, /*block_size=*/4);

  const AttentionBatch a = b.attention();
  EXPECT_EQ(a.num_seqs, 2);
  EXPECT_EQ(a.max_blocks_per_seq, 4);
  EXPECT_EQ(a.context_len[1], 10);

  b.clear();
  EXPECT_EQ(b.num_tokens(), 0);
  EXPECT_EQ(b.num_seqs(), 0);
  EXPECT_EQ(b.num_logits(), 0);
}

TEST(ForwardBatchDeathTest, ValidateCatchesASlotOutsideTheCache) {
  ForwardBatch b;
  b.max_blocks_per_seq = 1;
  const int32_t ids[2] = {1, 2};
  const int32_t blocks[1] = {9};
  b.add_sequence(ids, 2, 0, blocks, 1, 16, ForwardBatch::Logits::Last);
  EXPECT_DEATH(b.validate(/*num_cache_blocks=*/4, 16), "outside the cache");
}

TEST(KvCache, LayersArePoolsOfTheRequestedShape) {
  KvCacheSpec s;
  s.num_layers = 3;
  s.num_blocks = 5;
  s.block_size = 16;
  s.n_kv_heads = 2;
  s.head_dim = 8;
  s.dtype = DType::BF16;
  EXPECT_EQ(s.bytes_per_block(), size_t(2 * 3 * 16 * 2 * 8 * 2));
  KvCache c(s);
  ASSERT_EQ(c.num_layers(), 3);
  const size_t pool = 5 * 16 * 2 * 8 * 2;
  for (int l = 0; l < 3; ++l) {
    const KvCacheLayer& L = c.layer(l);
    EXPECT_EQ(L.num_blocks, 5);
    EXPECT_EQ(L.block_size, 16);
    EXPECT_EQ(L.dtype, DType::BF16);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(L.k) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(L.v) % 64, 0u);
    EXPECT_GE(static_cast<uint8_t*>(L.v) - static_cast<uint8_t*>(L.k), std::ptrdiff_t(pool));
  }
  s.dtype = DType::F16;
  EXPECT_THROW(KvCache{s}, Error);
}

}  // namespace
}  // namespace pypto
