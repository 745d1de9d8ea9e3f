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

}  // namespace
}  // namespace pypto
