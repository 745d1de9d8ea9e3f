// The speculation cost model's policy (engine/spec_cost_model.h) with synthetic step costs: the
// model is fed the times a step of each row count would take and a scripted acceptance, and must
// choose k = 0 where verifying costs more than it emits, k > 0 where it pays, and keep probing.
#include "engine/spec_cost_model.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <vector>

namespace pypto {
namespace {

// A synthetic engine: plain step 1.0 s, `verify(rows)` seconds for a step with that many rows per
// request, `draft` seconds per drafting pass; `accepts(step, k)` drafts accepted of k.
struct Sim {
  std::function<double(int32_t rows)> verify;
  double draft = 0;
  std::function<int32_t(int64_t step, int32_t k)> accepts;
  int32_t batch = 1;
  int32_t cap = 3;

  SpecCostModel model{3};
  std::vector<AcceptanceEstimate> est = std::vector<AcceptanceEstimate>(size_t(batch));
  std::vector<int32_t> ks;  // the k of each step
  double seconds = 0, tokens = 0;

  void run(int64_t steps) {
    est.resize(size_t(batch));
    for (int64_t i = 0; i < steps; ++i) {
      std::vector<SpecCostModel::Candidate> c;
      for (const AcceptanceEstimate& e : est) c.push_back({e.alpha(model.global_alpha()), cap});
      const int32_t k = model.choose_k(c);
      ks.push_back(k);
      if (k > 0) model.observe_drafting(batch, k, draft * k);
      const double t = k == 0 ? 1.0 : verify(1 + k);
      model.observe_step(batch, 1 + k, t);
      seconds += t + draft * k;
      for (AcceptanceEstimate& e : est) {
        const int32_t a = k > 0 ? accepts(int64_t(ks.size()) - 1, k) : 0;
        if (k > 0) {
          e.observe(k, a);
          model.observe_acceptance(k, a);
        }
        tokens += 1 + a;
      }
    }
  }
  int64_t speculating(size_t from = 0) const {
    int64_t n = 0;
    for (size_t i = from; i < ks.size(); ++i) n += ks[i] > 0;
    return n;
  }
};

// The 35B-A3B shape's measured costs (docs/status.md, issue 37): a 2/3/4-row verify 1.86/2.8/3.2x
// a plain step, an MTP draft pass 0.44x.
double moe_verify(int32_t rows) { return rows == 2 ? 1.86 : rows == 3 ? 2.8 : 3.2; }
double dense_verify(int32_t rows) { return 1.0 + 0.025 * (rows - 1); }

TEST(SpecCostModel, ExpectedTokensIsTheGeometricSum) {
  EXPECT_DOUBLE_EQ(expected_tokens(0.0, 3), 1.0);
  EXPECT_DOUBLE_EQ(expected_tokens(1.0, 3), 4.0);
  EXPECT_DOUBLE_EQ(expected_tokens(0.5, 2), 1.75);
  EXPECT_NEAR(expected_tokens(0.8, 4), 1 + 0.8 + 0.64 + 0.512 + 0.4096, 1e-12);
  EXPECT_DOUBLE_EQ(expected_tokens(0.7, 0), 1.0);
}

TEST(SpecCostModel, AcceptanceEstimateFollowsTheRuns) {
  AcceptanceEstimate all, none, half;
  for (int i = 0; i < 20; ++i) {
    all.observe(4, 4);
    none.observe(4, 0);
    half.observe(1, i % 2);
  }
  EXPECT_GT(all.alpha(0.5), 0.95);
  EXPECT_LT(none.alpha(0.5), 0.1);
  EXPECT_NEAR(half.alpha(0.5), 0.5, 0.1);
  EXPECT_DOUBLE_EQ(AcceptanceEstimate().alpha(0.3), 0.3);  // no run yet: the prior
}

TEST(SpecCostModel, ExploresPlainThenOneDraftThenDecides) {
  SpecCostModel m(3);
  const std::vector<SpecCostModel::Candidate> c = {{1.0, 3}};
  EXPECT_EQ(m.choose_k(c), 0);
  EXPECT_FALSE(m.context_needed());  // the plain exploration step measures plain decoding
  m.observe_step(1, 1, 1.0);
  EXPECT_EQ(m.choose_k(c), 1);
  EXPECT_TRUE(m.context_needed());
  m.observe_drafting(1, 1, 0.05);
  m.observe_step(1, 2, 1.05);
  EXPECT_EQ(m.choose_k(c), 3);  // alpha 1 on a dense cost: the longest k
  // No request may draft: nothing to choose.
  EXPECT_EQ(m.choose_k(std::vector<SpecCostModel::Candidate>{{1.0, 0}}), 0);
}

TEST(SpecCostModel, MoeVerifyCostingMoreThanItEmitsChoosesZeroEvenAtFullAcceptance) {
  SpecCostModel m(3);
  m.observe_step(1, 1, 1.0);
  for (int32_t r = 2; r <= 4; ++r) m.observe_step(1, r, moe_verify(r));
  m.observe_drafting(1, 1, 0.44);
  // alpha 1, k <= 3: k = 1 emits 2 tokens for 2.3 steps, k = 2 3 for 3.68, k = 3 4 for 4.52.
  EXPECT_EQ(m.best_k(std::vector<SpecCostModel::Candidate>{{1.0, 3}}), 0);
  // The same costs with a free drafter and 1.9x at every k would pay at k = 3 (4 tokens / 1.9).
  SpecCostModel flat(3);
  flat.observe_step(1, 1, 1.0);
  for (int32_t r = 2; r <= 4; ++r) flat.observe_step(1, r, 1.9);
  flat.observe_drafting(1, 1, 0.0);
  EXPECT_EQ(flat.best_k(std::vector<SpecCostModel::Candidate>{{1.0, 3}}), 3);
}

TEST(SpecCostModel, MoeRunSpeculatesOnlyToExploreAndProbe) {
  Sim s{moe_verify, 0.44, [](int64_t, int32_t k) { return k; }};
  s.run(1000);
  // Exploration (one step) and probes with their backoff (32, 64, 128, ..): a handful of steps.
  EXPECT_LE(s.speculating(), 8) << "steps with drafts";
  EXPECT_GE(s.model.probes(), 3);  // it keeps probing
  EXPECT_EQ(s.ks.back(), 0);
  // Throughput against plain decoding (1 token per second): the probes cost under 2 %.
  EXPECT_GT(s.tokens / s.seconds, 0.98);
}

TEST(SpecCostModel, DenseVerifyPaysAtAcceptance08) {
  // Deterministic 80 %: of each five first-position trials four are accepted; later positions
  // follow the same pattern.
  int64_t trial = 0;
  Sim s{dense_verify, 0.05, [&trial](int64_t, int32_t k) {
          int32_t a = 0;
          while (a < k && (trial++ % 5) != 4) ++a;
          return a;
        }};
  s.run(400);
  EXPECT_GT(s.speculating(100), 280) << "of the last 300 steps";
  std::vector<SpecCostModel::Candidate> c = {{0.8, 3}};
  EXPECT_GT(s.model.best_k(c), 0);
  EXPECT_GT(s.tokens / s.seconds, 1.5);
}

TEST(SpecCostModel, ZeroAcceptanceStopsAfterTheProbeBudget) {
  Sim s{dense_verify, 0.05, [](int64_t, int32_t) { return 0; }};
  s.run(3000);
  // Steps with drafts: the k = 1 exploration, the first decision(s) on the prior, and probes
  // backing off 32 .. 1024 steps apart.
  EXPECT_LE(s.speculating(), 12);
  EXPECT_LE(s.speculating(1000), 3) << "in the last 2000 steps";
  EXPECT_EQ(s.model.probe_interval(), SpecCostModel::kMaxProbe);
  EXPECT_GT(s.tokens / s.seconds, 0.99);
}

TEST(SpecCostModel, ProbesRediscoverSpeculationWhenAcceptanceRises) {
  Sim s{dense_verify, 0.05, [](int64_t step, int32_t k) { return step < 300 ? 0 : k; }};
  s.run(300);
  EXPECT_LE(s.speculating(100), 2);
  s.run(700);
  // Within the next probe interval (at most 512 steps here) it turns speculation back on.
  EXPECT_GT(s.speculating(900), 90) << "of the last 100 steps";
  EXPECT_EQ(s.ks.back(), 3);
}

TEST(SpecCostModel, CostsAreKeptPerBatchSize) {
  // One request: a 4-row step 1.1x plain. Eight: the rows of eight requests make it 3x.
  SpecCostModel m(3);
  for (int32_t b : {1, 8}) {
    m.observe_step(b, 1, 1.0 * b);
    for (int32_t r = 2; r <= 4; ++r) m.observe_step(b, r, (b == 1 ? 1.0 + 0.033 * (r - 1) : 1.0 + 0.66 * (r - 1)) * b);
    m.observe_drafting(b, 1, 0.01 * b);
  }
  const std::vector<SpecCostModel::Candidate> one(1, {0.6, 3}), eight(8, {0.6, 3});
  EXPECT_GT(m.best_k(one), 0);
  EXPECT_EQ(m.best_k(eight), 0);
  EXPECT_DOUBLE_EQ(m.step_seconds(7, 1), 8.0);  // 5..8 requests share a bucket
  EXPECT_LT(m.step_seconds(2, 1), 0);           // never measured
}

TEST(SpecCostModel, UnmeasuredRowsAreInterpolated) {
  SpecCostModel m(7);
  m.observe_step(1, 1, 1.0);
  m.observe_step(1, 2, 1.1);
  m.observe_step(1, 6, 1.5);
  EXPECT_NEAR(m.step_seconds(1, 4), 1.3, 1e-12);
  EXPECT_NEAR(m.step_seconds(1, 8), 1.7, 1e-12);  // the last slope, 0.1 per row
  m.observe_step(1, 2, 1.5);                       // an EMA, not the last sample
  EXPECT_NEAR(m.step_seconds(1, 2), 1.1 + SpecCostModel::kEma * 0.4, 1e-12);
}

TEST(SpecCostModel, DisabledAlwaysSpeculates) {
  Sim s{moe_verify, 0.44, [](int64_t, int32_t k) { return k; }};
  s.model = SpecCostModel(3, /*enabled=*/false);
  s.run(50);
  EXPECT_EQ(s.speculating(), 50);
  EXPECT_TRUE(s.model.context_needed());
}

TEST(SpecCostModel, ContextIsKeptOnlyNearProbesWhileOff) {
  Sim s{moe_verify, 0.44, [](int64_t, int32_t k) { return k; }};
  s.run(200);
  // Off: the drafter's context is needed only within kContextLead steps of the next probe.
  int32_t needed = 0;
  for (int i = 0; i < 200; ++i) {
    s.run(1);
    needed += s.model.context_needed();
  }
  EXPECT_LE(needed, 2 * (SpecCostModel::kContextLead + 1));
}

}  // namespace
}  // namespace pypto
