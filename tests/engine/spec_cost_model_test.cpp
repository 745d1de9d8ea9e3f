// The speculation cost model's policy (engine/spec_cost_model.h) with synthetic step costs: the
// model is fed the times a step of each row count would take and a scripted acceptance, and must
// choose k = 0 where verifying costs more than it emits, k > 0 where it pays, and keep probing.
#include "engine/spec_cost_model.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/spec_throttle.h"

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

TEST(SpecCostModel, ExploresPlainThenTheLongestKThenDecides) {
  SpecCostModel m(3);
  const std::vector<SpecCostModel::Candidate> c = {{1.0, 3}};
  EXPECT_EQ(m.choose_k(c), 0);
  EXPECT_FALSE(m.context_needed());  // the plain exploration step measures plain decoding
  m.observe_step(1, 1, 1.0);
  EXPECT_EQ(m.choose_k(c), 3);  // no acceptance seen yet (prior 0.5): the cap
  EXPECT_TRUE(m.context_needed());
  m.observe_drafting(1, 3, 0.15);
  m.observe_step(1, 4, 1.075);
  m.observe_acceptance(3, 3);
  EXPECT_EQ(m.choose_k(c), 3);  // alpha 1 on a dense cost: the longest k
  // Rows between plain and the explored 4 are a straight line until measured.
  EXPECT_NEAR(m.step_seconds(1, 2), 1.025, 1e-12);
  // No request may draft: nothing to choose.
  EXPECT_EQ(m.choose_k(std::vector<SpecCostModel::Candidate>{{1.0, 0}}), 0);
}

TEST(SpecCostModel, ExploresOneDraftWhenTheEnginesDraftsAreMostlyRejected) {
  SpecCostModel m(3);
  for (int i = 0; i < 10; ++i) m.observe_acceptance(3, 0);  // earlier requests' drafts
  ASSERT_LT(m.global_alpha(), SpecCostModel::kExploreLongest);
  const std::vector<SpecCostModel::Candidate> c = {{0.1, 3}};
  EXPECT_EQ(m.choose_k(c), 0);
  m.observe_step(1, 1, 1.0);
  EXPECT_EQ(m.choose_k(c), 1);
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
  m.observe_step(1, 2, 1.5);  // a median, not the last sample: of two, their mean
  EXPECT_NEAR(m.step_seconds(1, 2), 1.3, 1e-12);
  m.observe_step(1, 2, 1.5);
  EXPECT_NEAR(m.step_seconds(1, 2), 1.5, 1e-12);
  EXPECT_NEAR(m.step_seconds(1, 1.5), 1.25, 1e-12);  // between grid points (a mixed step's rows)
}

TEST(SpecCostModel, AMixedStepCountsForTheNearestGridPointAlongTheSlope) {
  SpecCostModel m(3);
  m.observe_step(2, 1, 1.0);
  // No cost at 2 rows yet: a step at 1.5 rows (one of two requests drafted one token) taking
  // 1.1 s extrapolates from the plain cost through it: 1.2 s at 2 rows.
  m.observe_step(2, 1.5, 1.1);
  EXPECT_NEAR(m.step_seconds(2, 2), 1.2, 1e-12);
  // Now 1.75 rows (three of four drafts... of two requests at k = 1.5 average) taking 1.2 s
  // counts at 2 rows as 1.2 + 0.25 * 0.2 = 1.25; the median of {1.2, 1.25} is 1.225.
  m.observe_step(2, 1.75, 1.2);
  EXPECT_NEAR(m.step_seconds(2, 2), 1.225, 1e-12);
  // A step near 1 row counts for the plain cost, moved down the slope (0.225 per row).
  m.observe_step(2, 1.25, 1.05);
  EXPECT_NEAR(m.step_seconds(2, 1), 0.5 * (1.0 + 1.05 - 0.25 * 0.225), 1e-12);
}

// The reference for the per-request choice: every assignment k_i in 0 .. cap_i, rated with the
// model's measured costs by the formula of engine/spec_cost_model.h.
double brute_rate(const SpecCostModel& m, const std::vector<SpecCostModel::Candidate>& c, const std::vector<int32_t>& ks) {
  double tokens = 0, drafts = 0;
  int32_t passes = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    tokens += expected_tokens(c[i].alpha, ks[i]);
    drafts += ks[i];
    passes = std::max(passes, ks[i]);
  }
  const int32_t b = int32_t(c.size());
  return tokens / (m.step_seconds(b, 1.0 + drafts / b) + passes * std::max(0.0, m.draft_seconds(b)));
}

double brute_best(const SpecCostModel& m, const std::vector<SpecCostModel::Candidate>& c) {
  std::vector<int32_t> ks(c.size(), 0);
  double best = 0;
  for (;;) {
    best = std::max(best, brute_rate(m, c, ks));
    size_t i = 0;
    while (i < ks.size() && ks[i] == c[i].cap) ks[i++] = 0;
    if (i == ks.size()) return best;
    ++ks[i];
  }
}

TEST(SpecCostModel, ARejectingRequestGetsNoDraftsWhileACopyingOneKeepsItsK) {
  // Two requests, a dense verify (2.5 % per row per request) and a cheap drafter.
  SpecCostModel m(3);
  for (int32_t r = 1; r <= 4; ++r) m.observe_step(2, r, 2.0 * dense_verify(r));
  m.observe_drafting(2, 1, 0.02);
  const std::vector<SpecCostModel::Candidate> mixed = {{0.02, 3}, {0.95, 3}};
  EXPECT_EQ(m.best(mixed), (std::vector<int32_t>{0, 3}));
  const std::vector<SpecCostModel::Candidate> both = {{0.9, 3}, {0.9, 3}};
  EXPECT_EQ(m.best(both), (std::vector<int32_t>{3, 3}));
  const std::vector<SpecCostModel::Candidate> none = {{0.02, 3}, {0.01, 3}};
  EXPECT_EQ(m.best(none), (std::vector<int32_t>{0, 0}));
  // A cap (max_tokens, the throttle) bounds a request's k.
  EXPECT_EQ(m.best(std::vector<SpecCostModel::Candidate>{{0.95, 1}, {0.95, 3}}), (std::vector<int32_t>{1, 3}));
}

TEST(SpecCostModel, ThePerRequestChoiceIsTheBestAssignment) {
  // Costlier rows (a 4-request MoE-like step: +30 % per row per request, drafting 0.1 per pass):
  // the best assignment mixes k, and the model must find the brute-force optimum.
  SpecCostModel m(4);
  for (int32_t r = 1; r <= 5; ++r) m.observe_step(4, r, 1.0 + 0.3 * (r - 1));
  m.observe_drafting(4, 1, 0.1);
  const std::vector<std::vector<SpecCostModel::Candidate>> cases = {
      {{0.97, 4}, {0.6, 4}, {0.3, 4}, {0.0, 4}},
      {{0.99, 4}, {0.99, 2}, {0.8, 4}, {0.5, 1}},
      {{0.9, 4}, {0.9, 4}, {0.9, 4}, {0.9, 4}},
      {{0.7, 3}, {0.75, 4}, {0.2, 4}, {0.95, 0}},
  };
  int mixed = 0;
  for (const auto& c : cases) {
    const std::vector<int32_t> ks = m.best(c);
    ASSERT_EQ(ks.size(), c.size());
    for (size_t i = 0; i < c.size(); ++i) EXPECT_LE(ks[i], c[i].cap);
    const double plain = 4.0 / m.step_seconds(4, 1);
    const double best = brute_best(m, c);
    if (best > plain * (1 + SpecCostModel::kMargin)) {
      EXPECT_NEAR(brute_rate(m, c, ks), best, 1e-9) << "case " << &c - cases.data();
    } else {
      EXPECT_EQ(*std::max_element(ks.begin(), ks.end()), 0);
    }
    mixed += *std::max_element(ks.begin(), ks.end()) != *std::min_element(ks.begin(), ks.end());
  }
  EXPECT_GE(mixed, 2) << "the cases need mixed assignments";
}

TEST(SpecCostModel, OneNoisyStepDoesNotFlipTheChoice) {
  // Speculation pays by 8 % (every draft accepted, k = 1: 2 tokens for a 1.85 s step); every 8th
  // step the host stalls and the step takes twice as long, and every step jitters by +-2 %. An
  // EMA of weight 0.25 moves to 2.3 s after a stall (0.87x plain) and flips the choice; the
  // median of the last kWindow steps does not move.
  int64_t step = 0;
  Sim s{[&step](int32_t) {
          const double jitter = 1.0 + 0.01 * double((step * 7919) % 5 - 2);
          return 1.85 * jitter * (++step % 8 == 0 ? 2.0 : 1.0);
        },
        0.0, [](int64_t, int32_t k) { return k; }};
  s.cap = 1;
  s.run(600);
  // After the warm-up (the first decision, on an acceptance prior, may be plain until the first
  // probe), every step speculates but the plain probes (<= 1 in 32, backing off).
  int64_t plain = 0;
  for (size_t i = 100; i < s.ks.size(); ++i) plain += s.ks[i] == 0;
  EXPECT_LE(plain, 6) << "plain steps of the last 500";
  EXPECT_TRUE(s.model.stats().speculating);
  EXPECT_EQ(s.model.stats().steps_speculating + s.model.stats().steps_plain, 600);
}

// A shared host: the 2-row step was timed in a quiet spell (0.6 s), the plain steps since in a busy
// one (1.0 s). Every draft is rejected: a verify then emits what a plain step does and cannot cost
// less, so plain decoding wins whatever the timings say; every draft accepted, speculation does.
TEST(SpecCostModel, AVerifyTimedFasterThanPlainStepsDoesNotMakeRejectedDraftsPay) {
  SpecCostModel m(1);
  m.observe_step(1, 1, 0.6);
  m.observe_step(1, 2, 0.6);
  for (int32_t i = 0; i < SpecCostModel::kWindow; ++i) m.observe_step(1, 1, 1.0);
  m.observe_drafting(1, 1, 0.05);
  EXPECT_DOUBLE_EQ(m.step_seconds(1, 2), 1.0) << "a 2-row step estimated below a plain one";
  EXPECT_EQ(m.best_k(std::vector<SpecCostModel::Candidate>(1, {0.0, 1})), 0);
  EXPECT_EQ(m.best_k(std::vector<SpecCostModel::Candidate>(1, {1.0, 1})), 1);
}

TEST(SpecCostModel, StatsCountTheDecisions) {
  Sim s{moe_verify, 0.44, [](int64_t, int32_t k) { return k; }};
  s.run(300);
  const SpecCostStats& st = s.model.stats();
  EXPECT_FALSE(st.speculating);
  EXPECT_EQ(st.last_k, 0);
  EXPECT_EQ(st.steps_speculating + st.steps_plain, 300);
  EXPECT_EQ(st.steps_speculating, s.speculating());
  ASSERT_EQ(st.chosen_k.size(), 4u);
  EXPECT_EQ(st.chosen_k[0], st.steps_plain);  // one request: a request-step per step
  EXPECT_EQ(st.chosen_k[1] + st.chosen_k[2] + st.chosen_k[3], st.steps_speculating);
  EXPECT_EQ(st.probes, s.model.probes());
  EXPECT_NEAR(st.plain_step_s, 1.0, 1e-12);
  EXPECT_NEAR(st.plain_tokens_per_s, 1.0, 1e-12);
  EXPECT_GT(st.spec_step_s, 1.86);             // the best speculative step: verify + drafting
  EXPECT_LT(st.spec_tokens_per_s, 1.0);        // and what it would give: less than plain
}

// The full-depth Qwen3.6-27B shape with its MTP head, as measured (docs/status.md, issue 30/37):
// a plain decode step 1.3 s, a drafting pass 98 ms, a step drafting k = 1/2/3 (verify and
// drafting) 1.60/2.29/2.73x a plain step. One request of `max_tokens` tokens; `accepts(k)` drafts
// of k accepted. Returns tokens per second of synthetic time.
struct SlowRun {
  double tokens_per_s = 0;
  std::vector<int32_t> ks;
};
constexpr double kSlowPlain = 1.3, kSlowDraft = 0.098;
SlowRun run_slow(const std::vector<double>& k_step, int32_t max_k, bool cost_model, int32_t max_tokens,
                 const std::function<int32_t(int32_t k)>& accepts) {
  SpecCostModel model(max_k, cost_model);
  SpecThrottle throttle(max_k);
  AcceptanceEstimate est;
  SlowRun out;
  double seconds = 0;
  int32_t tokens = 0;
  while (tokens < max_tokens) {
    // The scheduler's cap: the throttle's k, and room for the accepted drafts and the bonus token.
    const int32_t cap = std::max(0, std::min(throttle.peek_k(), max_tokens - tokens - 1));
    const std::vector<SpecCostModel::Candidate> c = {{est.alpha(model.global_alpha()), cap}};
    const int32_t k = std::min(model.choose_k(c), throttle.next_k());
    out.ks.push_back(k);
    const double total = kSlowPlain * k_step[size_t(k)];
    if (k > 0) model.observe_drafting(1, k, kSlowDraft * k);
    model.observe_step(1, 1 + k, total - kSlowDraft * k);  // the verify alone
    seconds += total;
    const int32_t a = k > 0 ? accepts(k) : 0;
    if (k > 0) {
      est.observe(k, a);
      throttle.observe(k, a);
      model.observe_acceptance(k, a);
    }
    tokens += 1 + a;
  }
  out.tokens_per_s = double(tokens) / seconds;
  return out;
}

const std::vector<double> kSlowSteps = {1.0, 1.60, 2.29, 2.73};

TEST(SpecCostModel, SlowStepsConvergeWithinAShortRequest) {
  // Every draft accepted (an oracle head), a 24-token request: the forced k and the cost model
  // at each max k. With 1.3 s steps the warm-up is a plain step and one step at the cap; the
  // cost model must then stay on the best k, so it reaches within 6 % of the best forced k.
  const auto all = [](int32_t k) { return k; };
  const double plain = 1.0 / kSlowPlain;  // tokens per second of plain decoding
  double best_forced = 0;
  for (int32_t max_k = 1; max_k <= 3; ++max_k) {
    const SlowRun forced = run_slow(kSlowSteps, max_k, false, 24, all);
    const SlowRun model = run_slow(kSlowSteps, max_k, true, 24, all);
    best_forced = std::max(best_forced, forced.tokens_per_s);
    EXPECT_GT(model.tokens_per_s, 0.94 * forced.tokens_per_s) << "max k " << max_k;
    EXPECT_GT(model.tokens_per_s, 1.15 * plain) << "max k " << max_k;
    // After the two warm-up steps every step speculates (but the last, which may have room for
    // no draft: one token left).
    for (size_t i = 2; i + 1 < model.ks.size(); ++i) EXPECT_GT(model.ks[i], 0) << "max k " << max_k << " step " << i;
  }
  const SlowRun model3 = run_slow(kSlowSteps, 3, true, 24, all);
  EXPECT_GT(model3.tokens_per_s, 0.94 * best_forced);
  EXPECT_EQ(model3.ks[1], 3);  // the exploration at the cap
}

TEST(SpecCostModel, SlowStepsKeepSpeculatingAfterOneStepWithinNoise) {
  // The step at the cap (the exploration) comes out 15 % slow (the drafter restarting its
  // context, a noisy host): on that one sample plain decoding looks 2 % better, within the
  // noise, so the model takes more samples, and with them keeps speculating.
  const auto all = [](int32_t k) { return k; };
  std::vector<double> steps = kSlowSteps;
  SpecCostModel model(3);
  AcceptanceEstimate est;
  int32_t spec = 0;
  for (int step = 0; step < 12; ++step) {
    const std::vector<SpecCostModel::Candidate> c = {{est.alpha(model.global_alpha()), 3}};
    const int32_t k = model.choose_k(c);
    spec += k > 0;
    double total = kSlowPlain * steps[size_t(k)];
    if (step == 1) total *= 1.15;
    if (k > 0) model.observe_drafting(1, k, kSlowDraft * k);
    model.observe_step(1, 1 + k, total - kSlowDraft * k);
    if (k > 0) {
      est.observe(k, all(k));
      model.observe_acceptance(k, all(k));
    }
  }
  EXPECT_GE(spec, 11) << "of 12 steps, only the plain exploration is plain";
  EXPECT_TRUE(model.stats().speculating);
}

TEST(SpecCostModel, SlowStepsThatDoNotPayStopAtOnce) {
  // The same slow plain step, but a step drafting k costs 2.2/3.4/4.6x a plain one (an MoE
  // verify): even at full acceptance plain decoding wins, so after the warm-up every step is plain.
  const std::vector<double> costly = {1.0, 2.2, 3.4, 4.6};
  const SlowRun model = run_slow(costly, 3, true, 64, [](int32_t k) { return k; });
  // After the warm-up only the first probe (32 decode steps on) drafts.
  int32_t after = 0;
  for (size_t i = 2; i < model.ks.size(); ++i) after += model.ks[i] > 0;
  EXPECT_LE(after, 1) << "speculative steps after the warm-up of " << model.ks.size();
  EXPECT_GT(model.tokens_per_s, 0.95 / kSlowPlain);  // plain decoding: 1 / 1.3 s
  // Drafts that are all rejected on the cheap steps: it stops within the confirmation samples.
  const SlowRun rejected = run_slow(kSlowSteps, 3, true, 64, [](int32_t) { return 0; });
  int32_t spec = 0;
  for (const int32_t k : rejected.ks) spec += k > 0;
  EXPECT_LE(spec, 3) << "speculative steps of " << rejected.ks.size();
  EXPECT_GT(rejected.tokens_per_s, 0.9 / kSlowPlain);
}

}  // namespace
}  // namespace pypto
