// Qwen3-MoE routing (model/moe_router.h): softmax over all experts, top-k with the lower index
// first on ties, renormalisation iff norm_topk_prob, and the grouping by expert the expert loop
// walks. Checked against a double-precision computation written out here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "model/moe_router.h"

using namespace pypto;

namespace {

// Softmax in double, then the indices sorted by descending probability, ties by ascending index.
std::vector<int> ranked(const std::vector<float>& logits, std::vector<double>* probs) {
  const double m = *std::max_element(logits.begin(), logits.end());
  probs->assign(logits.size(), 0.0);
  double sum = 0;
  for (size_t e = 0; e < logits.size(); ++e) sum += (*probs)[e] = std::exp(double(logits[e]) - m);
  for (double& p : *probs) p /= sum;
  std::vector<int> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return (*probs)[a] > (*probs)[b]; });
  return idx;
}

}  // namespace

TEST(MoeRouter, TopKOfTheSoftmaxWithAndWithoutRenormalisation) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int trial = 0; trial < 50; ++trial) {
    const int E = 16 + trial % 3 * 56, k = 1 + trial % 8;  // 16, 72, 128 experts; top-1 .. top-8
    std::vector<float> logits(static_cast<size_t>(E));
    for (float& l : logits) l = nd(rng);
    std::vector<double> p;
    const std::vector<int> want = ranked(logits, &p);
    for (bool norm : {false, true}) {
      std::vector<float> buf = logits, w(static_cast<size_t>(k));
      std::vector<int32_t> ex(static_cast<size_t>(k));
      route_token(buf.data(), E, k, norm, ex.data(), w.data());
      double sel = 0;
      for (int j = 0; j < k; ++j) sel += p[size_t(want[size_t(j)])];
      for (int j = 0; j < k; ++j) {
        ASSERT_EQ(ex[size_t(j)], want[size_t(j)]) << "trial " << trial << " slot " << j;
        const double expect = p[size_t(want[size_t(j)])] / (norm ? sel : 1.0);
        EXPECT_NEAR(w[size_t(j)], expect, 1e-6 * expect + 1e-12) << "trial " << trial << " slot " << j;
      }
      if (norm) {
        EXPECT_NEAR(std::accumulate(w.begin(), w.end(), 0.0), 1.0, 1e-6);
      }
    }
  }
}

// Equal logits: the lower expert index wins, whatever the positions of the tied experts.
TEST(MoeRouter, TiesTakeTheLowerExpertFirst) {
  std::vector<float> logits = {0.5f, 2.0f, 1.0f, 2.0f, 2.0f, -1.0f, 1.0f, 0.0f};
  std::vector<int32_t> ex(4);
  std::vector<float> w(4);
  route_token(logits.data(), 8, 4, true, ex.data(), w.data());
  EXPECT_EQ(ex, (std::vector<int32_t>{1, 3, 4, 2}));
  EXPECT_EQ(w[0], w[1]);
  EXPECT_EQ(w[1], w[2]);
  std::vector<float> flat(8, 3.0f);
  route_token(flat.data(), 8, 3, false, ex.data(), w.data());
  EXPECT_EQ(ex[0], 0);
  EXPECT_EQ(ex[1], 1);
  EXPECT_EQ(ex[2], 2);
  EXPECT_FLOAT_EQ(w[0], 0.125f);
}

// Grouping: expert e's (token, weight) pairs, tokens ascending; every pair once.
TEST(MoeRouter, GroupByExpertListsTokensInOrder) {
  const int T = 5, E = 4, k = 2;
  const std::vector<int32_t> expert = {2, 0, 0, 3, 2, 3, 1, 2, 0, 2};
  std::vector<float> weight(size_t(T * k));
  for (size_t i = 0; i < weight.size(); ++i) weight[i] = 0.1f * float(i + 1);
  std::vector<int32_t> offsets(E + 1), tokens(size_t(T * k));
  std::vector<float> weights(size_t(T * k));
  group_by_expert(expert.data(), weight.data(), T, E, k, offsets.data(), tokens.data(), weights.data());
  EXPECT_EQ(offsets, (std::vector<int32_t>{0, 3, 4, 8, 10}));
  EXPECT_EQ(tokens, (std::vector<int32_t>{0, 1, 4, 3, 0, 2, 3, 4, 1, 2}));
  // Each grouped pair carries the weight of its (token, slot).
  for (int e = 0; e < E; ++e)
    for (int32_t i = offsets[size_t(e)]; i < offsets[size_t(e) + 1]; ++i) {
      const int32_t t = tokens[size_t(i)];
      const int slot = expert[size_t(t * k)] == e ? 0 : 1;
      ASSERT_EQ(expert[size_t(t * k + slot)], e);
      EXPECT_EQ(weights[size_t(i)], weight[size_t(t * k + slot)]);
    }
}
