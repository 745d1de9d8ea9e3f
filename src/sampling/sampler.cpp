#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "sampling/logits_processors.h"
#include "sampling/philox.h"

namespace pypto {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// First candidate count tried by the top-p partial selection; doubled until the mass is reached.
constexpr size_t kTopPInitialCandidates = 64;

// (logit desc, id asc): the order in which truncation keeps tokens.
struct MoreLikely {
  const float* x;
  bool operator()(int32_t a, int32_t b) const { return x[a] > x[b] || (x[a] == x[b] && a < b); }
};

double log_sum_exp(std::span<const float> x, float max) {
  if (max == kNegInf) return double(kNegInf);
  double s = 0.0;
  for (float v : x) s += std::exp(double(v) - double(max));
  return double(max) + std::log(s);
}

// The `k` most likely ids, sorted most likely first; `ids` is scratch of any content.
void select_top(std::span<const float> x, size_t k, std::vector<int32_t>& ids) {
  ids.resize(x.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int32_t(i);
  k = std::min(k, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), MoreLikely{x.data()});
  ids.resize(k);
}

// Draws from the tokens `ids` with unnormalised weights `w` (same order) by inverse CDF.
int32_t draw(const std::vector<int32_t>& ids, const std::vector<double>& w, double u) {
  double total = 0.0;
  for (double v : w) total += v;
  const double target = u * total;
  double cum = 0.0;
  for (size_t i = 0; i < ids.size(); ++i) {
    cum += w[i];
    if (target < cum) return ids[i];
  }
  // Rounding can leave target == total: the last token with weight wins.
  for (size_t i = ids.size(); i-- > 0;)
    if (w[i] > 0.0) return ids[i];
  return ids.front();
}

int32_t sample_random(std::span<float> x, const SamplingParams& p, double u) {
  const size_t vocab = x.size();
  const float inv_t = 1.0f / p.temperature;
  for (float& v : x) v *= inv_t;
  const float max = *std::max_element(x.begin(), x.end());
  if (max == kNegInf) return argmax_lowest_id(x);  // everything masked: nothing to draw from

  std::vector<int32_t> ids;
  std::vector<double> w;
  const bool truncate = (p.top_k && size_t(*p.top_k) < vocab) || p.top_p < 1.0f;
  if (!truncate) {
    // Full distribution in id order; min_p is a threshold on exp(x - max) (p / p_max).
    ids.resize(vocab);
    w.resize(vocab);
    for (size_t i = 0; i < vocab; ++i) {
      const double e = std::exp(double(x[i]) - double(max));
      ids[i] = int32_t(i);
      w[i] = e >= double(p.min_p) ? e : 0.0;
    }
    return draw(ids, w, u);
  }

  // `total` is the mass top-p is measured against: of the top-k tokens, or of the whole vocab.
  double total = 0.0;
  if (p.top_k && size_t(*p.top_k) < vocab) {
    select_top(x, size_t(*p.top_k), ids);
    for (int32_t id : ids) total += std::exp(double(x[id]) - double(max));
  } else {
    // top-p alone: grow a partial selection until it holds top_p of the total mass.
    for (float v : x) total += std::exp(double(v) - double(max));
    for (size_t k = kTopPInitialCandidates;; k *= 2) {
      select_top(x, k, ids);
      double mass = 0.0;
      for (int32_t id : ids) mass += std::exp(double(x[id]) - double(max));
      if (mass >= double(p.top_p) * total || ids.size() == vocab) break;
    }
  }
  w.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) w[i] = std::exp(double(x[ids[i]]) - double(max));
  if (p.top_p < 1.0f) {
    // Keep the smallest prefix whose mass reaches top_p, including the token that crosses it.
    const double target = double(p.top_p) * total;
    double cum = 0.0;
    size_t keep = ids.size();
    for (size_t i = 0; i < ids.size(); ++i) {
      cum += w[i];
      if (cum >= target) {
        keep = i + 1;
        break;
      }
    }
    ids.resize(keep);
    w.resize(keep);
  }
  if (p.min_p > 0.0f) {
    // w[0] is the most likely kept token: exp(0) = 1.
    for (double& v : w)
      if (v < double(p.min_p)) v = 0.0;
  }
  return draw(ids, w, u);
}

}  // namespace

int32_t argmax_lowest_id(std::span<const float> logits) {
  PYPTO_ASSERT(!logits.empty());
  size_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best]) best = i;
  return int32_t(best);
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int32_t k) {
  const float max = *std::max_element(logits.begin(), logits.end());
  const double lse = log_sum_exp(logits, max);
  std::vector<int32_t> ids;
  select_top(logits, size_t(std::max(k, 0)), ids);
  std::vector<TokenLogprob> out;
  out.reserve(ids.size());
  for (int32_t id : ids) out.push_back({id, float(double(logits[id]) - lse)});
  return out;
}

SampledToken sample_row(std::span<float> x, const SamplerRow& row) {
  PYPTO_ASSERT(row.params != nullptr && !x.empty());
  const SamplingParams& p = *row.params;
  sanitize_nan(x);
  SampledToken out;

  // Logprobs describe the raw model distribution, so take what we need before processing.
  double raw_lse = 0.0;
  std::vector<float> raw;
  if (p.logprobs) {
    raw.assign(x.begin(), x.end());
    raw_lse = log_sum_exp(raw, *std::max_element(raw.begin(), raw.end()));
    if (*p.logprobs > 0) out.top_logprobs = top_logprobs(raw, *p.logprobs);
  }

  if (!p.logit_bias.empty()) apply_logit_bias(x, p.logit_bias);
  apply_penalties(x, row.prompt_token_ids, row.output_token_ids, p.repetition_penalty,
                  p.presence_penalty, p.frequency_penalty);
  if (int64_t(row.output_token_ids.size()) < p.min_tokens) {
    mask_tokens(x, row.eos_token_ids);
    mask_tokens(x, p.stop_token_ids);
  }

  if (p.is_greedy()) {
    out.token_id = argmax_lowest_id(x);
  } else {
    const double u = philox_uniform(row.seed, uint64_t(row.output_token_ids.size()));
    out.token_id = sample_random(x, p, u);
  }
  if (p.logprobs) out.logprob = float(double(raw[out.token_id]) - raw_lse);
  return out;
}

std::vector<SampledToken> sample_batch(std::span<float> logits, int64_t vocab_size,
                                       std::span<const SamplerRow> rows) {
  PYPTO_ASSERT(vocab_size > 0 && logits.size() == rows.size() * size_t(vocab_size), "logits ",
               logits.size(), " for ", rows.size(), " rows of vocab ", vocab_size);
  std::vector<SampledToken> out(rows.size());
  const int64_t n = int64_t(rows.size());
#pragma omp parallel for schedule(dynamic, 1) if (n > 1)
  for (int64_t r = 0; r < n; ++r)
    out[r] = sample_row(logits.subspan(size_t(r * vocab_size), size_t(vocab_size)), rows[r]);
  return out;
}

}  // namespace pypto
