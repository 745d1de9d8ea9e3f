// The draft model's map from its positions to the request's verified tokens after a skipped span
// (engine/draft_token_map.h).
#include "engine/draft_token_map.h"

#include <gtest/gtest.h>

namespace pypto {
namespace {

std::vector<int32_t> iota(int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

TEST(DraftTokenMap, AShortCatchUpSkipsNothing) {
  DraftTokenMap m;
  std::vector<int32_t> held = iota(20);
  EXPECT_EQ(m.bound(held, 36, 16), 16);
  EXPECT_FALSE(m.gapped());
  EXPECT_EQ(held.size(), 20u);
  EXPECT_EQ(m.token(25), 25);
  EXPECT_EQ(m.position(35), 35);
}

TEST(DraftTokenMap, ALongCatchUpKeepsWhatIsHeldAndFeedsTheLastTokensAfterIt) {
  DraftTokenMap m;
  std::vector<int32_t> held = iota(20);
  EXPECT_EQ(m.bound(held, 100, 16), 16);  // 80 missing: tokens 84..99 at positions 20..35
  EXPECT_TRUE(m.gapped());
  EXPECT_EQ(held.size(), 20u);
  EXPECT_EQ(m.gap_at, 20);
  EXPECT_EQ(m.skipped, 64);
  EXPECT_EQ(m.token(19), 19);
  EXPECT_EQ(m.token(20), 84);
  EXPECT_EQ(m.position(99), 35);
  EXPECT_EQ(m.position(100), 36);  // the next token's position
  // Fed the tail, then 2 tokens later: a short catch-up past the gap.
  for (int64_t p = 20; p < 36; ++p) held.push_back(int32_t(m.token(p)));
  EXPECT_EQ(m.bound(held, 102, 16), 2);
  EXPECT_EQ(m.skipped, 64);
}

TEST(DraftTokenMap, ASecondLongStretchDropsTheFirstTailAndSkipsFromTheSameGap) {
  DraftTokenMap m;
  std::vector<int32_t> held = iota(20);
  m.bound(held, 100, 16);
  for (int64_t p = 20; p < 36; ++p) held.push_back(int32_t(m.token(p)));
  EXPECT_EQ(m.bound(held, 300, 16), 16);
  EXPECT_EQ(held.size(), 20u) << "the first tail goes: one gap at most";
  EXPECT_EQ(m.gap_at, 20);
  EXPECT_EQ(m.skipped, 300 - 16 - 20);
  EXPECT_EQ(m.token(20), 284);
}

TEST(DraftTokenMap, ARollbackToTheGapRemovesIt) {
  DraftTokenMap m;
  std::vector<int32_t> held = iota(20);
  m.bound(held, 100, 16);
  m.truncate(30);
  EXPECT_TRUE(m.gapped()) << "positions past the gap are still held";
  m.truncate(20);
  EXPECT_FALSE(m.gapped());
  EXPECT_EQ(m.token(20), 20);
}

}  // namespace
}  // namespace pypto
