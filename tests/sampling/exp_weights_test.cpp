// exp_weight / exp_weights / sum_exp_weights (sampling/exp_weights.h): accuracy against std::exp in
// double, and the same bits from the vectorised loops (the CPU's clone) as from the scalar
// function, so every machine draws the same token for a seeded request.
#include "sampling/exp_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace pypto {
namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

TEST(ExpWeights, WithinThreeTenthsOfAMillionthOfExp) {
  EXPECT_EQ(exp_weight(0.0f), 1.0f);
  double worst = 0.0;
  for (int i = 0; i <= 2000000; ++i) {
    const float d = -87.0f * float(i) / 2000000.0f;
    const double want = std::exp(double(d)), got = exp_weight(d);
    worst = std::max(worst, std::fabs(got - want) / want);
  }
  EXPECT_LT(worst, 3e-7);
}

TEST(ExpWeights, ZeroBelowMinus87AndForMinusInfinity) {
  EXPECT_EQ(exp_weight(-87.5f), 0.0f);
  EXPECT_EQ(exp_weight(-1e30f), 0.0f);
  EXPECT_EQ(exp_weight(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_GT(exp_weight(-87.0f), 0.0f);
}

TEST(ExpWeights, LoopsGiveTheScalarFunctionsBits) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> logit(-120.0f, 30.0f);
  for (size_t n : {size_t(1), size_t(7), size_t(8), size_t(1023), size_t(1025), size_t(151936)}) {
    std::vector<float> x(n), w(n);
    for (float& v : x) v = logit(rng);
    x[n / 2] = -std::numeric_limits<float>::infinity();
    const float max = 30.0f;
    exp_weights(x.data(), n, max, w.data());
    WeightSum by_one;
    for (size_t i = 0; i < n; ++i) {
      ASSERT_TRUE(same_bits(w[i], exp_weight(x[i] - max))) << "n=" << n << " i=" << i << " x=" << x[i];
      by_one.add(i, w[i]);
    }
    const double s = sum_weights(w.data(), n);
    EXPECT_EQ(sum_exp_weights(x.data(), n, max), s) << n;
    EXPECT_EQ(by_one.total(), s) << n;
  }
}

// WeightSum of a row's nonzero weights alone equals sum_weights of the whole row (the small top-k
// shortcut and the general path then draw with the same total).
TEST(ExpWeights, SumOfTheNonzeroWeightsIsTheRowsSum) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> w(5000, 0.0f);
  WeightSum kept;
  for (size_t i = 3; i < w.size(); i += 37) {
    w[i] = u(rng);
    kept.add(i, w[i]);
  }
  EXPECT_EQ(kept.total(), sum_weights(w.data(), w.size()));
  double sequential = 0.0;  // a different order: not the same value in general
  for (float v : w) sequential += double(v);
  EXPECT_NEAR(kept.total(), sequential, 1e-9 * sequential);
}

}  // namespace
}  // namespace pypto
