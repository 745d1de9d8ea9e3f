// encode_batch / decode_batch (the step a rank process or a linked replica receives): every field
// survives the round trip, the hybrids' state slots, snapshot restores and saves included, and a
// truncated or padded message is refused.
#include "parallel/replicas/batch_codec.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace pypto {
namespace {

ForwardBatch sample_batch() {
  ForwardBatch b;
  b.max_blocks_per_seq = 3;
  const int32_t ids[] = {5, 6, 7, 8, 9};
  const int32_t t0[] = {4, 1, 2}, t1[] = {0, 3, 5};
  b.add_sequence(ids, 3, 16, t0, 3, 16, ForwardBatch::Logits::Last);
  b.add_sequence(ids + 3, 2, 0, t1, 1, 16, ForwardBatch::Logits::All);
  b.state_slots = {2, 0};
  b.state_restore = {-1, 7};
  b.state_saves = {{0, 3, 4}, {1, 1, 6}};
  b.draft_rows = {0, 1};  // speculative verify rows (model/gdn_rollback.h)
  return b;
}

TEST(BatchCodec, RoundTripKeepsTheRecurrentStateFields) {
  const ForwardBatch b = sample_batch();
  std::vector<uint8_t> msg;
  encode_batch(b, msg);
  ForwardBatch d;
  decode_batch(msg.data(), msg.size(), d);
  EXPECT_EQ(d.token_ids, b.token_ids);
  EXPECT_EQ(d.positions, b.positions);
  EXPECT_EQ(d.slot_mapping, b.slot_mapping);
  EXPECT_EQ(d.query_start, b.query_start);
  EXPECT_EQ(d.context_len, b.context_len);
  EXPECT_EQ(d.block_tables, b.block_tables);
  EXPECT_EQ(d.logits_indices, b.logits_indices);
  EXPECT_EQ(d.max_blocks_per_seq, b.max_blocks_per_seq);
  EXPECT_EQ(d.state_slots, b.state_slots);
  EXPECT_EQ(d.state_restore, b.state_restore);
  EXPECT_EQ(d.draft_rows, b.draft_rows);
  ASSERT_EQ(d.state_saves.size(), 2u);
  EXPECT_EQ(d.state_saves[1].seq, 1);
  EXPECT_EQ(d.state_saves[1].rows, 1);
  EXPECT_EQ(d.state_saves[1].entry, 6);
}

TEST(BatchCodec, RefusesTruncatedAndPaddedMessages) {
  std::vector<uint8_t> msg;
  encode_batch(sample_batch(), msg);
  ForwardBatch d;
  EXPECT_THROW(decode_batch(msg.data(), msg.size() - 4, d), Error);
  msg.push_back(0);
  EXPECT_THROW(decode_batch(msg.data(), msg.size(), d), Error);
}

}  // namespace
}  // namespace pypto
