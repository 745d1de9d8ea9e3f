// Rejection sampling (sampling/rejection_sampler.h) must emit tokens that follow the target's
// distribution p exactly, whatever the draft's q. Statistical tests with fixed seeds (so never
// flaky): many independent draws over a small vocabulary, a chi-square statistic against p.
// With 5..7 degrees of freedom a correct sampler gives ~5; the bound 40 sits far above that
// (p < 1e-6) and far below what a wrong rule gives at these sample sizes (hundreds: see
// AWrongResidualIsCaught, which runs the same check on a sampler that redraws from p on
// rejection instead of from norm(max(0, p - q))).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "sampling/philox.h"
#include "sampling/rejection_sampler.h"
#include "sampling/sampler.h"

namespace pypto {
namespace {

constexpr double kChiSquareBound = 40.0;

// Pearson's chi-square of `counts` (n draws) against the distribution p (cells with p = 0 must
// be empty: any count there is returned as infinity).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& p) {
  int64_t n = 0;
  for (int64_t c : counts) n += c;
  double x2 = 0.0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0.0) {
      if (counts[i] > 0) return INFINITY;
      continue;
    }
    const double e = p[i] * double(n);
    x2 += (double(counts[i]) - e) * (double(counts[i]) - e) / e;
  }
  return x2;
}

using StepFn = std::function<int32_t(std::span<const float>, std::span<const float>, int32_t, double, double)>;

// The first token of n runs: draft x ~ q, then `step` with two fresh uniforms.
std::vector<int64_t> first_tokens(const std::vector<float>& p, const std::vector<float>& q, int n, const StepFn& step,
                                  double* accept_rate = nullptr) {
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> u01(0.0, 1.0);
  std::vector<int64_t> counts(p.size(), 0);
  int64_t accepted = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t x = draw_from_weights(q, u01(rng));
    const int32_t t = step(p, q, x, u01(rng), u01(rng));
    accepted += t == x;
    ++counts[size_t(t)];
  }
  if (accept_rate) *accept_rate = double(accepted) / n;
  return counts;
}

int32_t correct_step(std::span<const float> p, std::span<const float> q, int32_t x, double ua, double ur) {
  return rejection_step(p, q, x, ua, ur).token_id;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(RejectionSampler, FirstTokenFollowsTheTargetForAFixedPAndQ) {
  const std::vector<float> p = {0.05f, 0.10f, 0.15f, 0.20f, 0.0f, 0.50f};
  const std::vector<float> q = {0.40f, 0.30f, 0.10f, 0.05f, 0.10f, 0.05f};  // mass where p has none
  double rate = 0;
  const auto counts = first_tokens(p, q, 200000, correct_step, &rate);
  EXPECT_LT(chi_square(counts, to_double(p)), kChiSquareBound);
  // Acceptance is sum_x min(p(x), q(x)) = 0.05 + 0.10 + 0.10 + 0.05 + 0 + 0.05 = 0.35 (the
  // accepted count also includes residual draws equal to x, which the residual never gives:
  // max(0, p - q) is 0 wherever q >= p, and x is drawn where q > 0).
  EXPECT_NEAR(rate, 0.35, 0.005);
}

TEST(RejectionSampler, AWrongResidualIsCaught) {
  const std::vector<float> p = {0.05f, 0.10f, 0.15f, 0.20f, 0.0f, 0.50f};
  const std::vector<float> q = {0.40f, 0.30f, 0.10f, 0.05f, 0.10f, 0.05f};
  // Redrawing from p on rejection over-weights the tokens the draft already proposes often.
  const StepFn wrong = [](std::span<const float> pp, std::span<const float> qq, int32_t x, double ua, double ur) {
    if (qq[size_t(x)] > 0 && ua * qq[size_t(x)] < pp[size_t(x)]) return x;
    return draw_from_weights(pp, ur);
  };
  EXPECT_GT(chi_square(first_tokens(p, q, 200000, wrong), to_double(p)), 10 * kChiSquareBound);
}

TEST(RejectionSampler, ADraftEqualToTheTargetIsAlwaysAccepted) {
  const std::vector<float> p = {0.1f, 0.2f, 0.3f, 0.4f};
  double rate = 0;
  first_tokens(p, p, 20000, correct_step, &rate);
  EXPECT_EQ(rate, 1.0);
}

// The whole request path: logits rows of the target and the draft, the request's temperature,
// top-k, top-p, min-p and penalties applied to both (sampling_distribution), the draft drawn from
// its q, rejection_sample over [k + 1, vocab] rows with Philox draws of each seed.
TEST(RejectionSampler, RequestTokensFollowTheProcessedTargetDistribution) {
  constexpr int64_t V = 8;
  SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_k = 6;
  sp.top_p = 0.95f;
  sp.min_p = 0.02f;
  sp.presence_penalty = 0.5f;
  sp.repetition_penalty = 1.2f;
  const std::vector<int32_t> prompt = {1, 2}, output = {3};
  const std::vector<float> target0 = {1.0f, 0.2f, 2.0f, 1.5f, -1.0f, 0.7f, 0.0f, 1.8f};
  const std::vector<float> target1 = {0.3f, 1.1f, 0.2f, 0.9f, 1.4f, -0.5f, 0.6f, 0.1f};
  const std::vector<float> draft0 = {2.0f, 1.0f, 0.5f, 1.5f, 0.3f, 1.2f, -1.0f, 0.2f};

  // p: the distribution plain decoding draws position 0 from.
  std::vector<float> p;
  std::vector<float> scratch = target0;
  sampling_distribution(scratch, SamplerRow{&sp, prompt, output, {}, 0, {}}, p);
  std::vector<float> q;
  scratch = draft0;
  sampling_distribution(scratch, SamplerRow{&sp, prompt, output, {}, 0, {}}, q);
  ASSERT_EQ(p.size(), size_t(V));

  std::vector<int64_t> counts(V, 0);
  int64_t accepted = 0;
  constexpr int kRuns = 100000;
  for (uint64_t seed = 0; seed < kRuns; ++seed) {
    const int32_t x = draw_from_weights(q, philox_uniform(seed, kDraftStream | output.size()));
    const std::vector<int32_t> drafts = {x};
    std::vector<int32_t> history = output;
    history.push_back(x);
    const SamplerRow rows[2] = {{&sp, prompt, output, {}, seed, {}}, {&sp, prompt, history, {}, seed, {}}};
    std::vector<float> logits = target0;
    logits.insert(logits.end(), target1.begin(), target1.end());
    const std::vector<SampledToken> run = rejection_sample(logits, V, drafts, q, rows);
    ASSERT_GE(run.size(), 1u);
    ASSERT_LE(run.size(), 2u);
    ++counts[size_t(run[0].token_id)];
    accepted += run.size() == 2;
  }
  EXPECT_LT(chi_square(counts, to_double(p)), kChiSquareBound);
  double overlap = 0;
  for (int64_t i = 0; i < V; ++i) overlap += std::min(p[size_t(i)], q[size_t(i)]);
  EXPECT_NEAR(double(accepted) / kRuns, overlap, 0.01);
  EXPECT_LT(overlap, 0.9);  // the draft differs enough for rejections to matter
}

// sampling_distribution is the distribution sample_row draws from (the same kept set after top-k,
// top-p and min-p), so rejection sampling's p is plain decoding's.
TEST(RejectionSampler, SamplingDistributionIsWhatSampleRowDraws) {
  SamplingParams sp;
  sp.temperature = 0.7f;
  sp.top_k = 5;
  sp.top_p = 0.9f;
  sp.min_p = 0.05f;
  sp.frequency_penalty = 0.3f;
  const std::vector<int32_t> output = {2, 2, 6};
  const std::vector<float> logits = {0.5f, 1.5f, 2.5f, 0.1f, 1.0f, -2.0f, 2.2f, 1.9f, 0.0f};
  std::vector<float> p, scratch = logits;
  sampling_distribution(scratch, SamplerRow{&sp, {}, output, {}, 0, {}}, p);
  std::vector<int64_t> counts(p.size(), 0);
  for (uint64_t seed = 0; seed < 50000; ++seed) {
    scratch = logits;
    ++counts[size_t(sample_row(scratch, SamplerRow{&sp, {}, output, {}, seed, {}}).token_id)];
  }
  EXPECT_LT(chi_square(counts, to_double(p)), kChiSquareBound);
}

}  // namespace
}  // namespace pypto
