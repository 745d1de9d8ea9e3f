#include <gtest/gtest.h>

#include "core/error.h"
#include "engine/block_tables.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;

ScheduledRequest sched(const std::string& id, bool is_new, Ids blocks) {
  ScheduledRequest s;
  s.req_id = id;
  s.is_new = is_new;
  s.block_ids = std::move(blocks);
  return s;
}

TEST(BlockTables, NewReplacesRunningAppendsFinishedAndPreemptedDrop) {
  BlockTables t;
  SchedulerOutput a;
  a.scheduled = {sched("x", true, {0, 1}), sched("y", true, {2})};
  t.apply(a);
  EXPECT_EQ(t.table("x"), (Ids{0, 1}));
  SchedulerOutput b;
  b.scheduled = {sched("x", false, {}), sched("y", false, {3})};
  t.apply(b);
  EXPECT_EQ(t.table("x"), (Ids{0, 1}));
  EXPECT_EQ(t.table("y"), (Ids{2, 3}));
  SchedulerOutput c;
  c.preempted_req_ids = {"y"};
  c.finished_req_ids = {"x"};
  t.apply(c);
  EXPECT_EQ(t.size(), 0u);
  EXPECT_THROW(t.table("x"), Error);
  SchedulerOutput d;  // y resumed with a fresh full table
  d.scheduled = {sched("y", true, {5, 2})};
  t.apply(d);
  EXPECT_EQ(t.table("y"), (Ids{5, 2}));
}

// Hybrid models: each running request holds a Gated DeltaNet state slot from scheduling (new or
// resumed) until it finishes or is preempted; the batch carries them; more requests than slots
// is an Error naming the limit; without enable_state_slots nothing changes.
TEST(BlockTables, StateSlotsFollowRequests) {
  BlockTables t;
  t.enable_state_slots(2);
  SchedulerOutput a;
  a.scheduled = {sched("x", true, {0}), sched("y", true, {1})};
  for (ScheduledRequest& s : a.scheduled) {
    s.num_scheduled_tokens = 1;
    s.token_ids = {7};
    s.samples = true;
  }
  ForwardBatch batch;
  build_forward_batch(a, t, 16, batch);
  EXPECT_EQ(batch.state_slots, (Ids{0, 1}));
  EXPECT_EQ(t.state_slot("x"), 0);
  SchedulerOutput full;
  full.scheduled = {sched("z", true, {2})};
  EXPECT_THROW(t.apply(full), Error) << "a third request with two slots";
  SchedulerOutput b;  // x finishes, y is preempted: both slots free; z and y (resumed) take them
  b.finished_req_ids = {"x"};
  b.preempted_req_ids = {"y"};
  b.scheduled = {sched("z", true, {2}), sched("y", true, {3})};
  t.apply(b);
  EXPECT_NE(t.state_slot("z"), t.state_slot("y"));
  EXPECT_THROW(t.state_slot("x"), Error);

  BlockTables plain;
  plain.apply(a);
  EXPECT_EQ(plain.state_slot("x"), -1);
  ForwardBatch pb;
  build_forward_batch(a, plain, 16, pb);
  EXPECT_TRUE(pb.state_slots.empty());
}

}  // namespace
}  // namespace pypto
