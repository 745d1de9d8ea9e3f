// The adaptive draft length (engine/spec_throttle.h): rejections shorten k and then pause
// drafting for doubling periods; an acceptance restores it.
#include <gtest/gtest.h>

#include "engine/spec_throttle.h"

namespace pypto {
namespace {

TEST(SpecThrottle, RejectionsHalveKThenPause) {
  SpecThrottle t(8);
  EXPECT_EQ(t.next_k(), 8);
  t.observe(8, 0);
  EXPECT_EQ(t.next_k(), 4);
  t.observe(4, 0);
  EXPECT_EQ(t.next_k(), 2);
  t.observe(2, 0);
  EXPECT_EQ(t.next_k(), 1);
  t.observe(1, 0);  // the fourth miss in a row: pause
  for (int i = 0; i < SpecThrottle::kFirstPause; ++i) EXPECT_EQ(t.next_k(), 0) << i;
  EXPECT_EQ(t.next_k(), 1);
  for (int i = 0; i < SpecThrottle::kMaxMisses; ++i) t.observe(1, 0);
  EXPECT_EQ(t.paused_steps(), 2 * SpecThrottle::kFirstPause);  // the pause doubles
}

TEST(SpecThrottle, AcceptanceGrowsKBackAndResetsThePause) {
  SpecThrottle t(6);
  for (int i = 0; i < 3; ++i) t.observe(6, 0);
  EXPECT_EQ(t.k(), 1);
  t.observe(1, 1);  // accepted: k = max(k, a + 1)
  EXPECT_EQ(t.k(), 2);
  t.observe(2, 2);
  EXPECT_EQ(t.k(), 3);
  t.observe(3, 3);
  t.observe(4, 4);
  t.observe(5, 5);
  t.observe(6, 6);
  EXPECT_EQ(t.k(), 6);  // capped at the configured k
  t.observe(0, 0);      // no drafts: no change
  EXPECT_EQ(t.k(), 6);
  EXPECT_EQ(t.paused_steps(), 0);
}

TEST(SpecThrottle, DisabledThrottleProposesNothing) {
  SpecThrottle t;
  EXPECT_EQ(t.next_k(), 0);
}

}  // namespace
}  // namespace pypto
