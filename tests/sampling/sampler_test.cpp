#include <gtest/gtest.h>

#include <random>

#include <thread>

#include <cmath>
#include <limits>
#include <algorithm>
#include <optional>
#include <set>

#include "sampling/logits_processors.h"
#include "sampling/philox.h"
#include "sampling/sampler.h"

namespace pypto {
namespace {

std::vector<float> log_probs(std::vector<double> p) {
  std::vector<float> out;
  for (double v : p) out.push_back(float(std::log(v)));
  return out;
}

SampledToken sample(std::vector<float> logits, const SamplingParams& p, uint64_t seed = 0,
                    std::vector<int32_t> output = {}, std::vector<int32_t> prompt = {},
                    std::vector<int32_t> eos = {}) {
  SamplerRow row{&p, prompt, output, eos, seed};
  return sample_row(logits, row);
}

// Finds a seed whose first draw lands in [lo, hi).
uint64_t seed_with_draw_in(double lo, double hi, uint64_t draw = 0) {
  for (uint64_t s = 0;; ++s) {
    const double u = philox_uniform(s, draw);
    if (u >= lo && u < hi) return s;
  }
}

TEST(Sampler, GreedyTiesGoToLowestId) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(sample({1.0f, 3.0f, 3.0f, 2.0f}, p).token_id, 1);
  EXPECT_EQ(argmax_lowest_id(std::vector<float>{5.0f, 5.0f}), 0);
}

// The vectorised argmax against the plain first-maximum scan: sizes around its 16-wide blocks,
// the maximum (and its ties) in the blocks, in the tail and at both ends, all -inf.
TEST(Sampler, ArgmaxMatchesAPlainScan) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> small(-3, 3);  // few distinct values: many ties
  for (size_t n : {size_t(1), size_t(15), size_t(16), size_t(17), size_t(33), size_t(151936)}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> x(n);
      for (float& v : x) v = trial % 5 == 0 ? -std::numeric_limits<float>::infinity() : float(small(rng)) * 0.5f;
      if (trial % 5 == 1) x.back() = 100.0f;  // unique maximum in the tail
      if (trial % 5 == 2) x.front() = 100.0f;
      size_t want = 0;
      for (size_t i = 1; i < n; ++i)
        if (x[i] > x[want]) want = i;
      ASSERT_EQ(argmax_lowest_id(x), int32_t(want)) << "n " << n << " trial " << trial;
    }
  }
}

TEST(Sampler, NanNeverWins) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_EQ(sample({std::nanf(""), 0.5f, 0.25f}, p).token_id, 1);
}

TEST(Sampler, InfiniteLogitsStaySampleable) {
  SamplingParams p;  // temperature 1: two +inf logits share the mass, the rest get none
  const float inf = std::numeric_limits<float>::infinity();
  std::set<int32_t> seen;
  for (uint64_t s = 0; s < 100; ++s) seen.insert(sample({0.0f, inf, 1.0f, inf}, p, s).token_id);
  EXPECT_EQ(seen, (std::set<int32_t>{1, 3}));
  p.temperature = 0.5f;
  p.top_p = 0.9f;
  seen.clear();
  for (uint64_t s = 0; s < 100; ++s) seen.insert(sample({0.0f, inf, 1.0f, inf}, p, s).token_id);
  EXPECT_EQ(seen, (std::set<int32_t>{1, 3}));
}

TEST(Sampler, InverseCdfInIdOrderWithoutTruncation) {
  SamplingParams p;  // temperature 1, no truncation: draw over ids 0,1,2 with p = .5,.3,.2
  const auto logits = log_probs({0.5, 0.3, 0.2});
  EXPECT_EQ(sample(logits, p, seed_with_draw_in(0.0, 0.49)).token_id, 0);
  EXPECT_EQ(sample(logits, p, seed_with_draw_in(0.51, 0.79)).token_id, 1);
  EXPECT_EQ(sample(logits, p, seed_with_draw_in(0.81, 1.0)).token_id, 2);
}

TEST(Sampler, DrawCounterIsTheOutputLength) {
  SamplingParams p;
  const auto logits = log_probs({0.5, 0.5});
  const uint64_t seed = 99;
  for (uint64_t n = 0; n < 20; ++n) {
    const std::vector<int32_t> out(n, 0);  // token 0 repeated: no penalties configured
    const int32_t expect = philox_uniform(seed, n) < 0.5 ? 0 : 1;
    EXPECT_EQ(sample(logits, p, seed, out).token_id, expect) << "draw " << n;
  }
}

TEST(Sampler, TopPKeepsTheTokenThatCrossesP) {
  SamplingParams p;
  p.top_p = 0.6f;  // sorted mass: 0.5 (id 2), 0.8 (id 0) crosses 0.6 -> keep {2, 0}
  const auto logits = log_probs({0.3, 0.2, 0.5});
  // Kept weights renormalised, drawn in id order: id 0 -> 0.3/0.8 = 0.375, then id 2 -> 0.625.
  EXPECT_EQ(sample(logits, p, seed_with_draw_in(0.0, 0.37)).token_id, 0);
  EXPECT_EQ(sample(logits, p, seed_with_draw_in(0.38, 1.0)).token_id, 2);
  std::set<int32_t> seen;
  for (uint64_t s = 0; s < 200; ++s) seen.insert(sample(logits, p, s).token_id);
  EXPECT_EQ(seen, (std::set<int32_t>{0, 2}));
}

TEST(Sampler, TopPWithLargeVocabUsesPartialSelection) {
  // 1000 tokens: token 500 has 60% of the mass, the rest share 40%. top_p 0.5 -> only 500.
  std::vector<double> probs(1000, 0.4 / 999);
  probs[500] = 0.6;
  SamplingParams p;
  p.top_p = 0.5f;
  for (uint64_t s = 0; s < 50; ++s) EXPECT_EQ(sample(log_probs(probs), p, s).token_id, 500);
  // top_p 0.6002 needs token 500 plus one more; ties among the rest go to the lowest id (0),
  // which keeps weight 0.0004 / 0.6004 and comes first in id order: a draw below 0.000666
  // picks it, any draw above picks 500.
  p.top_p = 0.6002f;
  EXPECT_EQ(sample(log_probs(probs), p, seed_with_draw_in(0.0, 0.0006)).token_id, 0);
  EXPECT_EQ(sample(log_probs(probs), p, seed_with_draw_in(0.001, 1.0)).token_id, 500);
}

// The kept set of top-k / top-p by selection equals a plain sort-based definition, on random rows
// with ties (logits rounded to a coarse grid).
std::vector<int32_t> kept_by_sort(const std::vector<float>& x, std::optional<int32_t> top_k, float top_p) {
  std::vector<int32_t> ids(x.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return x[a] > x[b]; });
  if (top_k) ids.resize(std::min(ids.size(), size_t(*top_k)));
  const float max = x[ids[0]];
  double total = 0.0;
  for (int32_t id : ids) total += double(std::exp(x[id] - max));
  double cum = 0.0;
  size_t keep = ids.size();
  for (size_t i = 0; i < ids.size(); ++i) {
    cum += double(std::exp(x[ids[i]] - max));
    if (cum >= double(top_p) * total) {
      keep = i + 1;
      break;
    }
  }
  ids.resize(keep);
  std::sort(ids.begin(), ids.end());
  return ids;
}

TEST(Sampler, SelectionMatchesSortBasedTruncation) {
  uint64_t state = 12345;
  auto next = [&] { return philox_uniform(77, state++); };
  for (int trial = 0; trial < 200; ++trial) {
    const size_t vocab = 1 + size_t(next() * 300);
    std::vector<float> x(vocab);
    for (float& v : x) v = float(std::round(next() * 40.0)) / 8.0f;  // ties on purpose
    SamplingParams p;
    if (trial % 3 != 0) p.top_k = 1 + int32_t(next() * double(vocab));
    p.top_p = trial % 3 == 1 ? 1.0f : float(0.05 + 0.9 * next());
    const std::vector<int32_t> want = kept_by_sort(x, p.top_k, p.top_p);
    std::set<int32_t> seen;
    for (uint64_t s = 0; s < 400; ++s) seen.insert(sample(x, p, s).token_id);
    // Every sampled token is in the kept set (the draws need not reach all of a large set).
    for (int32_t t : seen) EXPECT_TRUE(std::binary_search(want.begin(), want.end(), t)) << "trial " << trial << " token " << t;
    // A small kept set of likely tokens is drawn in full.
    bool all_likely = want.size() <= 3;
    for (int32_t t : want) all_likely = all_likely && x[t] >= *std::max_element(x.begin(), x.end()) - 2.0f;
    if (all_likely) EXPECT_EQ(seen.size(), want.size()) << "trial " << trial;
  }
}

// A small top-k (k · 16 < vocab) draws from the k best tokens alone; it must give exactly the token
// the whole-vocabulary path gives, for any top-p / min-p / temperature and any u (ties included).
TEST(Sampler, SmallTopKShortcutDrawsWhatTheFullVocabularyPathDraws) {
  uint64_t state = 99;
  auto next = [&] { return philox_uniform(5, state++); };
  int differing_from_greedy = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const size_t vocab = 400 + size_t(next() * 3000);
    std::vector<float> x(vocab);
    for (float& v : x) v = trial % 4 == 0 ? float(std::round(next() * 24.0)) / 4.0f : float(next() * 12.0 - 6.0);
    SamplingParams p;
    p.temperature = float(0.2 + 1.5 * next());
    p.top_k = 1 + int32_t(next() * double(vocab / 16 - 1));
    ASSERT_LT(size_t(*p.top_k) * 16, vocab);
    if (trial % 3 != 0) p.top_p = float(0.05 + 0.95 * next());
    if (trial % 5 == 0) p.min_p = float(0.3 * next());
    for (int d = 0; d < 8; ++d) {
      std::vector<float> a = x, b = x;
      const SampledToken fast = sample_row(a, SamplerRow{&p, {}, std::vector<int32_t>(size_t(d)), {}, 0});
      // sample_row draws with u = philox_uniform(seed 0, draw d); feed the full path the same u.
      const int32_t full = sample_random_full_vocab(b, p, philox_uniform(0, uint64_t(d)));
      ASSERT_EQ(fast.token_id, full) << "trial " << trial << " draw " << d << " vocab " << vocab << " k " << *p.top_k;
      differing_from_greedy += fast.token_id != argmax_lowest_id(x);
    }
  }
  EXPECT_GT(differing_from_greedy, 100);  // the comparison covered real draws, not only the top token
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplingParams p;
  p.top_k = 1;
  for (uint64_t s = 0; s < 50; ++s) EXPECT_EQ(sample({0.1f, 2.0f, 1.9f, 2.0f}, p, s).token_id, 1);
}

TEST(Sampler, TopKRestrictsToKMostLikely) {
  SamplingParams p;
  p.top_k = 2;
  std::set<int32_t> seen;
  for (uint64_t s = 0; s < 300; ++s) seen.insert(sample(log_probs({0.1, 0.4, 0.2, 0.3}), p, s).token_id);
  EXPECT_EQ(seen, (std::set<int32_t>{1, 3}));
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  SamplingParams p;
  p.min_p = 0.45f;  // p_max 0.4: keep tokens with p >= 0.18 -> ids 1 (0.4), 2 (0.35), 3 (0.2)
  std::set<int32_t> seen;
  for (uint64_t s = 0; s < 400; ++s) seen.insert(sample(log_probs({0.05, 0.4, 0.35, 0.2}), p, s).token_id);
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2, 3}));
  p.min_p = 0.6f;  // threshold 0.24: ids 1, 2
  seen.clear();
  for (uint64_t s = 0; s < 400; ++s) seen.insert(sample(log_probs({0.05, 0.4, 0.35, 0.2}), p, s).token_id);
  EXPECT_EQ(seen, (std::set<int32_t>{1, 2}));
}

TEST(Sampler, TemperatureSharpens) {
  // At T = 0.5 the weights square: .6^2 = .36 vs .4^2 = .16 -> p(0) = 0.36/0.52 = 0.6923.
  SamplingParams p;
  p.temperature = 0.5f;
  const auto logits = log_probs({0.6, 0.4});
  EXPECT_EQ(sample(logits, p, seed_with_draw_in(0.66, 0.69)).token_id, 0);
  EXPECT_EQ(sample(logits, p, seed_with_draw_in(0.70, 0.72)).token_id, 1);
}

TEST(Sampler, SeedReproducesAndDiffers) {
  SamplingParams p;
  std::vector<double> probs(50, 1.0 / 50);
  std::vector<int32_t> a, b, c;
  for (int i = 0; i < 30; ++i) {
    a.push_back(sample(log_probs(probs), p, 7, a).token_id);
    b.push_back(sample(log_probs(probs), p, 7, b).token_id);
    c.push_back(sample(log_probs(probs), p, 8, c).token_id);
  }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}

TEST(Sampler, LogitBiasAndPenalties) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logit_bias = {{0, 5.0f}};
  EXPECT_EQ(sample({1.0f, 3.0f}, p).token_id, 0);

  std::vector<float> x = {2.0f, -2.0f, 1.0f, 1.0f};
  apply_penalties(x, std::vector<int32_t>{0, 0}, std::vector<int32_t>{1}, 2.0f, 0.0f, 0.0f);
  EXPECT_EQ(x, (std::vector<float>{1.0f, -4.0f, 1.0f, 1.0f}));
  x = {2.0f, 2.0f, 2.0f};
  apply_penalties(x, std::vector<int32_t>{0}, std::vector<int32_t>{1, 2, 2}, 1.0f, 0.5f, 0.25f);
  EXPECT_EQ(x, (std::vector<float>{2.0f, 1.25f, 1.0f}));
}

TEST(Sampler, MinTokensMasksEosAndStopTokens) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.min_tokens = 2;
  p.stop_token_ids = {1};
  const std::vector<float> logits = {0.0f, 9.0f, 8.0f, 1.0f};
  EXPECT_EQ(sample(logits, p, 0, {}, {}, {2}).token_id, 3);
  EXPECT_EQ(sample(logits, p, 0, {5}, {}, {2}).token_id, 3);
  EXPECT_EQ(sample(logits, p, 0, {5, 5}, {}, {2}).token_id, 1);
}

TEST(Sampler, LogprobsAreRawLogSoftmax) {
  SamplingParams p;
  p.temperature = 0.0f;
  p.logprobs = 2;
  p.logit_bias = {{2, 10.0f}};  // changes the choice, not the reported distribution
  const SampledToken t = sample(log_probs({0.5, 0.3, 0.2}), p);
  EXPECT_EQ(t.token_id, 2);
  EXPECT_NEAR(t.logprob, std::log(0.2), 1e-6);
  ASSERT_EQ(t.top_logprobs.size(), 2u);
  EXPECT_EQ(t.top_logprobs[0].token_id, 0);
  EXPECT_NEAR(t.top_logprobs[0].logprob, std::log(0.5), 1e-6);
  EXPECT_EQ(t.top_logprobs[1].token_id, 1);
  EXPECT_NEAR(t.top_logprobs[1].logprob, std::log(0.3), 1e-6);
}

TEST(Sampler, BatchRowsAreIndependent) {
  // A row's token must not depend on its neighbours' options.
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  SamplingParams fancy;
  fancy.top_p = 0.9f;
  fancy.top_k = 3;
  fancy.repetition_penalty = 1.3f;
  SamplingParams plain;
  const int64_t vocab = 64;
  std::vector<float> base(vocab);
  for (int64_t i = 0; i < vocab; ++i) base[i] = float(std::sin(double(i) * 1.7));
  std::vector<int32_t> prompt = {1, 2, 3};
  std::vector<int32_t> out = {4};

  std::vector<int32_t> alone;
  for (const SamplingParams* p : {&greedy, &fancy, &plain}) {
    std::vector<float> row = base;
    SamplerRow r{p, prompt, out, {}, 1234};
    alone.push_back(sample_row(row, r).token_id);
  }
  std::vector<float> batch;
  for (int i = 0; i < 3; ++i) batch.insert(batch.end(), base.begin(), base.end());
  std::vector<SamplerRow> rows = {{&greedy, prompt, out, {}, 1234},
                                  {&fancy, prompt, out, {}, 1234},
                                  {&plain, prompt, out, {}, 1234}};
  // Serially, and with the rows spread over threads in a scrambled order (last row first).
  const RowRunner reversed_threads = [](int64_t n, const std::function<void(int64_t)>& fn) {
    std::vector<std::thread> ts;
    for (int64_t i = n - 1; i >= 0; --i) ts.emplace_back([&fn, i] { fn(i); });
    for (auto& t : ts) t.join();
  };
  for (const RowRunner& runner : {RowRunner{}, reversed_threads}) {
    std::vector<float> b = batch;
    const auto got = sample_batch(b, vocab, rows, runner);
    ASSERT_EQ(got.size(), 3u);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(got[i].token_id, alone[i]) << "row " << i << (runner ? " threaded" : " serial");
  }
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

// Structured outputs: only tokens whose bit is set can be drawn, greedy or sampled, at every
// vocabulary size (whole 32-token words and a partial last word), and logprobs stay those of
// the raw distribution.
TEST(Sampler, AllowedTokensMaskRestrictsTheDraw) {
  std::mt19937_64 rng(4);
  for (int64_t vocab : {5, 32, 33, 100, 1000}) {
    std::vector<uint32_t> mask(size_t((vocab + 31) / 32), 0);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocab; ++id)
      if (rng() % 7 == 0 || id == vocab / 2) {
        mask[size_t(id) / 32] |= 1u << (id % 32);
        allowed.push_back(id);
      }
    for (float temperature : {0.0f, 1.0f}) {
      SamplingParams p;
      p.temperature = temperature;
      p.logprobs = 0;
      for (uint64_t seed = 0; seed < 20; ++seed) {
        std::vector<float> logits(static_cast<size_t>(vocab));
        for (float& x : logits) x = float(rng() % 1000) / 100.0f;
        const std::vector<float> raw = logits;
        SamplerRow row{&p, {}, {}, {}, seed, mask};
        const SampledToken t = sample_row(logits, row);
        EXPECT_TRUE(std::find(allowed.begin(), allowed.end(), t.token_id) != allowed.end())
            << "vocab " << vocab << " drew " << t.token_id;
        if (temperature == 0.0f) {
          int32_t best = allowed[0];
          for (int32_t id : allowed)
            if (raw[size_t(id)] > raw[size_t(best)]) best = id;
          EXPECT_EQ(t.token_id, best);
        }
        double lse = 0, mx = *std::max_element(raw.begin(), raw.end());
        for (float x : raw) lse += std::exp(double(x) - mx);
        EXPECT_NEAR(t.logprob, double(raw[size_t(t.token_id)]) - mx - std::log(lse), 1e-4);
      }
    }
  }
}

}  // namespace
}  // namespace pypto
