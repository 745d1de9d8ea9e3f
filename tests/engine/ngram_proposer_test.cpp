// The n-gram proposer's rule (engine/ngram_proposer.h): longest suffix n-gram in [min, max], its
// earliest earlier occurrence, up to k following tokens.
#include <gtest/gtest.h>

#include "engine/ngram_proposer.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;

Ids propose(int32_t min_n, int32_t max_n, const Ids& ctx, int32_t k) {
  Ids out = {99};  // must be cleared
  NgramProposer(min_n, max_n).propose(ctx, k, out);
  return out;
}

TEST(NgramProposer, DocumentedExample) { EXPECT_EQ(propose(2, 3, {1, 2, 3, 4, 2, 3}, 4), (Ids{4, 2, 3})); }

TEST(NgramProposer, PrefersTheLongestSuffix) {
  // [2 3] occurs at 0 (followed by 7) and [1 2 3] at 3 (followed by 8): the longer one wins.
  EXPECT_EQ(propose(2, 3, {2, 3, 7, 1, 2, 3, 8, 1, 2, 3}, 1), (Ids{8}));
  // With max 2 only [2 3] is tried: its earliest occurrence (at 0) wins.
  EXPECT_EQ(propose(2, 2, {2, 3, 7, 1, 2, 3, 8, 1, 2, 3}, 1), (Ids{7}));
}

TEST(NgramProposer, TakesUpToKTokensAndStopsAtTheEnd) {
  const Ids ctx = {5, 6, 1, 2, 3, 4, 5, 6};
  EXPECT_EQ(propose(2, 2, ctx, 3), (Ids{1, 2, 3}));
  EXPECT_EQ(propose(2, 2, ctx, 10), (Ids{1, 2, 3, 4, 5, 6}));
  // A repeated single token: the occurrence overlapping the suffix counts.
  EXPECT_EQ(propose(1, 2, {9, 9, 9}, 4), (Ids{9}));
}

TEST(NgramProposer, NoMatchNoDraft) {
  EXPECT_EQ(propose(2, 4, {1, 2, 3, 4, 5}, 4), Ids{});
  EXPECT_EQ(propose(3, 4, {1, 2, 1, 2}, 4), Ids{});  // [1 2] repeats but is shorter than min 3
  EXPECT_EQ(propose(1, 1, {7}, 4), Ids{});            // a context of one token has nothing earlier
  EXPECT_EQ(propose(1, 1, {}, 4), Ids{});
  EXPECT_EQ(propose(1, 1, {7, 7}, 0), Ids{});
}

}  // namespace
}  // namespace pypto
