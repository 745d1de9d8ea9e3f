// build_forward_batch (parallel/replicas/replica_link.h): the batch rank 0 builds for a --dp
// replica it drives over a link, and for a --pp-virtual-engines engine whose block ids live at an
// offset in the shared cache. Expected values are written out from the model_executor.h contract
// (slot = table[pos / block_size] * block_size + pos % block_size; full tables for new requests,
// appended ids otherwise; finished requests dropped).
#include <gtest/gtest.h>

#include "parallel/replicas/replica_link.h"

namespace pypto {
namespace {

ScheduledRequest scheduled(const std::string& id, int64_t computed, std::vector<int32_t> tokens, bool is_new,
                           std::vector<int32_t> blocks, bool samples) {
  ScheduledRequest s;
  s.req_id = id;
  s.num_computed_tokens = computed;
  s.num_scheduled_tokens = int64_t(tokens.size());
  s.token_ids = std::move(tokens);
  s.is_new = is_new;
  s.block_ids = std::move(blocks);
  s.samples = samples;
  return s;
}

TEST(BuildForwardBatch, FollowsTheExecutorContractWithShiftedBlockIds) {
  constexpr int32_t kBlock = 4, kOffset = 100;
  BlockTables tables;
  ForwardBatch b;
  // Step 1: "a" is a new 6-token prompt in blocks {3, 5}, sampled; "b" a new 2-token chunk in {7}.
  SchedulerOutput s1;
  s1.scheduled.push_back(scheduled("a", 0, {10, 11, 12, 13, 14, 15}, true, {3, 5}, true));
  s1.scheduled.push_back(scheduled("b", 0, {20, 21}, true, {7}, false));
  build_forward_batch(s1, tables, kBlock, b, kOffset);
  EXPECT_EQ(b.token_ids, (std::vector<int32_t>{10, 11, 12, 13, 14, 15, 20, 21}));
  EXPECT_EQ(b.positions, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 0, 1}));
  EXPECT_EQ(b.slot_mapping, (std::vector<int64_t>{412, 413, 414, 415, 420, 421, 428, 429}));
  EXPECT_EQ(b.query_start, (std::vector<int32_t>{0, 6, 8}));
  EXPECT_EQ(b.context_len, (std::vector<int32_t>{6, 2}));
  EXPECT_EQ(b.max_blocks_per_seq, 2);
  EXPECT_EQ(b.block_tables, (std::vector<int32_t>{103, 105, 107, 0}));  // row b padded with 0
  EXPECT_EQ(b.logits_indices, (std::vector<int32_t>{5}));

  // Step 2: "a" decodes position 6 (its table unchanged), "b" finished; "c" is new in {9}.
  SchedulerOutput s2;
  s2.finished_req_ids = {"b"};
  s2.scheduled.push_back(scheduled("a", 6, {16}, false, {}, true));
  s2.scheduled.push_back(scheduled("c", 0, {30}, true, {9}, true));
  build_forward_batch(s2, tables, kBlock, b, kOffset);
  EXPECT_EQ(b.slot_mapping, (std::vector<int64_t>{422, 436}));
  EXPECT_EQ(b.block_tables, (std::vector<int32_t>{103, 105, 109, 0}));
  EXPECT_EQ(b.logits_indices, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(tables.size(), 2u);  // "b" forgotten

  // Without an offset the ids are as given; a running request's appended block extends its table.
  BlockTables plain;
  SchedulerOutput s3;
  s3.scheduled.push_back(scheduled("a", 0, {1, 2, 3, 4, 5}, true, {3, 5}, true));
  build_forward_batch(s3, plain, kBlock, b);
  EXPECT_EQ(b.slot_mapping, (std::vector<int64_t>{12, 13, 14, 15, 20}));
  SchedulerOutput s4;
  s4.scheduled.push_back(scheduled("a", 5, {6, 7, 8, 9}, false, {6}, true));  // positions 5..8
  build_forward_batch(s4, plain, kBlock, b);
  EXPECT_EQ(b.slot_mapping, (std::vector<int64_t>{21, 22, 23, 24}));
  EXPECT_EQ(b.block_tables, (std::vector<int32_t>{3, 5, 6}));
  EXPECT_EQ(b.context_len, (std::vector<int32_t>{9}));
}

}  // namespace
}  // namespace pypto
