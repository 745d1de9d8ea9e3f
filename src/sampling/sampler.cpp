#include "sampling/sampler.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <cmath>
#include <limits>
#include <optional>

#include "core/error.h"
#include "sampling/exp_weights.h"
#include "sampling/logits_processors.h"
#include "sampling/truncate_weights.h"
#include "sampling/philox.h"

namespace pypto {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

double log_sum_exp(std::span<const float> x, float max) {
  if (max == kNegInf) return double(kNegInf);
  return double(max) + std::log(sum_exp_weights(x.data(), x.size(), max));
}

// A truncation candidate: logit (after temperature), weight exp(x - max), token id.
struct Cand {
  float x;
  float w;
  int32_t id;
};
// (logit desc, id asc): the order in which truncation keeps tokens.
struct CandMoreLikely {
  bool operator()(const Cand& a, const Cand& b) const { return a.x > b.x || (a.x == b.x && a.id < b.id); }
};

// The k most likely of x (k <= x.size()) as a heap whose front is the least likely of them (w left
// 0): a bounded heap, so most tokens cost one comparison with the front.
std::vector<Cand> best_k_heap(std::span<const float> x, size_t k) {
  const CandMoreLikely more;
  std::vector<Cand> heap;
  heap.reserve(k + 1);
  for (size_t i = 0; i < x.size() && k > 0; ++i) {
    const Cand c{x[i], 0.0f, int32_t(i)};
    if (heap.size() < k) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), more);
    } else if (more(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), more);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), more);
    }
  }
  return heap;
}

// Weight thresholds (relative to the most likely token, which weighs 1) tried as prefilters: the
// tokens at or above one form a prefix of the (logit desc, id asc) order, so when that prefix
// provably holds the kept set, truncation only looks at it. Real distributions are peaked, so
// this is usually a few hundred tokens instead of the whole vocabulary.
constexpr float kPrefilterWeights[] = {1e-4f, 1e-9f};

// Top-p over cands: the least likely candidate of the smallest most-likely-first prefix whose
// mass reaches `need` (the candidate that crosses p is kept). Quickselect on mass: expected
// O(n), no sort. `cands` is reordered.
Cand top_p_boundary(std::vector<Cand>& cands, double need) {
  const CandMoreLikely more;
  size_t lo = 0, hi = cands.size();  // cands[0, lo) are kept; the boundary is in cands[lo, hi)
  while (hi - lo > 1) {
    // Median of three as pivot, moved to the end of the range.
    const size_t a = lo, b = lo + (hi - lo) / 2, c = hi - 1;
    size_t m = b;
    if (more(cands[a], cands[b]) != more(cands[a], cands[c])) m = a;
    else if (more(cands[c], cands[a]) != more(cands[c], cands[b])) m = c;
    std::swap(cands[m], cands[hi - 1]);
    const Cand pivot = cands[hi - 1];
    const auto mid_it = std::partition(cands.begin() + lo, cands.begin() + (hi - 1),
                                       [&](const Cand& t) { return more(t, pivot); });
    const size_t mid = size_t(mid_it - cands.begin());
    std::swap(cands[mid], cands[hi - 1]);  // the pivot right after the candidates above it
    double upper = 0.0;
    for (size_t i = lo; i < mid; ++i) upper += double(cands[i].w);
    if (upper >= need) {
      hi = mid;  // the crossing happens strictly above the pivot
    } else if (upper + double(pivot.w) >= need) {
      return pivot;  // the pivot crosses p
    } else {
      need -= upper + double(pivot.w);
      lo = mid + 1;
    }
  }
  if (lo < hi) return cands[lo];  // the one candidate left crosses p
  // Rounding kept everything: the boundary is the least likely candidate.
  Cand least = cands.front();
  for (const Cand& c : cands)
    if (more(least, c)) least = c;
  return least;
}

// Draws from the tokens with weight w[i] > 0, by inverse CDF in id order.
int32_t draw_in_id_order(const std::vector<float>& w, double total, double u) {
  const double target = u * total;
  double cum = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (w[i] <= 0.0f) continue;
    cum += double(w[i]);
    last = int32_t(i);
    if (target < cum) return last;
  }
  return last;  // rounding left target == total: the last token with weight
}

// The largest value of x (NaN-free input), from 16 independent running maxima (no loop-carried
// index as in std::max_element); a maximum is exact whatever the order.
float max_value(std::span<const float> x) {
  constexpr size_t kW = 16;
  float part[kW];
  for (size_t j = 0; j < kW; ++j) part[j] = kNegInf;
  size_t i = 0;
  for (; i + kW <= x.size(); i += kW)
    for (size_t j = 0; j < kW; ++j) part[j] = x[i + j] > part[j] ? x[i + j] : part[j];
  float best = kNegInf;
  for (size_t j = 0; j < kW; ++j) best = part[j] > best ? part[j] : best;
  for (; i < x.size(); ++i) best = x[i] > best ? x[i] : best;
  return best;
}

// A small top-k (k · 16 < vocab; Qwen3's generation_config asks for 20): the draw only ever sees the
// k best tokens, so weights are computed for those alone instead of exp() over the vocabulary
// (most of a row's sampling time). Same arithmetic as the general path below, in the same order:
// the heap sees the same comparisons, kept_mass and top-p run over the same heap array, the
// total is WeightSum's by-id sums of the kept weights and the draw walks them in id order (the
// general path's zeros add nothing to either), so a seeded request draws the same token either
// way (tested against the general path).
int32_t sample_small_top_k(std::span<const float> x, const SamplingParams& p, double u, float max, size_t k) {
  const CandMoreLikely more;
  std::vector<Cand> cands = best_k_heap(x, k);
  for (Cand& c : cands) c.w = exp_weight(c.x - max);
  Cand boundary = cands.front();
  if (p.top_p < 1.0f) {
    double kept_mass = 0.0;
    for (const Cand& c : cands) kept_mass += double(c.w);
    boundary = top_p_boundary(cands, double(p.top_p) * kept_mass);
  }
  std::vector<Cand> kept;
  kept.reserve(cands.size());
  for (const Cand& c : cands)
    if (!more(boundary, c) && !(c.w < p.min_p) && c.w > 0.0f) kept.push_back(c);
  std::sort(kept.begin(), kept.end(), [](const Cand& a, const Cand& b) { return a.id < b.id; });
  WeightSum sum;  // the general path's sum_weights over the same weights (zeros elsewhere)
  for (const Cand& c : kept) sum.add(size_t(c.id), c.w);
  const double total = sum.total();
  const double target = u * total;
  double cum = 0.0;
  for (const Cand& c : kept) {
    cum += double(c.w);
    if (target < cum) return c.id;
  }
  return kept.back().id;  // rounding left target == total: the last token with weight
}

// top-k, top-p and min-p, all O(vocab): selections, no sort. The kept tokens are those at least
// as likely as a boundary token in (logit desc, id asc) order. Fills w[vocab] with the kept
// tokens' weights exp(x - max) (0 for the others) and returns their sum.
// x: logits after temperature, max: their largest (finite).
double truncated_weights(std::span<const float> x, const SamplingParams& p, float max, std::vector<float>& w) {
  const size_t vocab = x.size();
  w.resize(vocab);
  exp_weights(x.data(), vocab, max, w.data());  // the max token weighs 1
  double total = sum_weights(w.data(), vocab);

  const bool top_p = p.top_p < 1.0f;
  std::optional<Cand> boundary;  // least likely kept token; none = keep all
  std::vector<Cand> cands;
  if (p.top_k && size_t(*p.top_k) < vocab) {
    const size_t k = size_t(*p.top_k);
    const CandMoreLikely more;
    if (k * 16 < vocab) {
      cands = best_k_heap(x, k);
      for (Cand& c : cands) c.w = w[size_t(c.id)];
      boundary = cands.front();
    } else {
      cands.resize(vocab);
      for (size_t i = 0; i < vocab; ++i) cands[i] = {x[i], w[i], int32_t(i)};
      std::nth_element(cands.begin(), cands.begin() + ptrdiff_t(k - 1), cands.end(), more);
      cands.resize(k);  // the k most likely, cands[k - 1] the least of them
      boundary = cands[k - 1];
    }
  } else if (top_p) {
    // Prefilter: the highest weight threshold whose prefix holds top_p of the mass. The sums
    // are rounded (relative error < 1e-11 over 152k terms), so a prefix counts only with a
    // margin of 1e-9: then it surely holds the kept set.
    std::array<double, std::size(kPrefilterWeights)> mass{};
    for (size_t l = 0; l < mass.size(); ++l) mass[l] = mass_at_least(w.data(), vocab, kPrefilterWeights[l]);
    float threshold = 0.0f;
    for (size_t l = 0; l < mass.size(); ++l)
      if (mass[l] >= double(p.top_p) * total * (1.0 + 1e-9)) {
        threshold = kPrefilterWeights[l];
        break;
      }
    for (size_t i = 0; i < vocab; ++i)
      if (w[i] >= threshold) cands.push_back({x[i], w[i], int32_t(i)});
  }
  if (top_p) {
    double kept_mass = 0.0;
    for (const Cand& c : cands) kept_mass += double(c.w);
    // With top-k, cands are exactly the top k, and top-p is relative to their mass; without it,
    // total is the whole vocabulary's mass (the prefilter dropped only tokens past the boundary).
    const double base = p.top_k && size_t(*p.top_k) < vocab ? kept_mass : total;
    boundary = top_p_boundary(cands, double(p.top_p) * base);
  }

  if (boundary || p.min_p > 0.0f) {
    // Kept: not less likely than the boundary in (logit desc, id asc) order; min_p: p / p_max = w.
    keep_weights(x.data(), w.data(), vocab, boundary.has_value(), boundary ? boundary->x : 0.0f,
                 boundary ? boundary->id : 0, p.min_p);
    total = sum_weights(w.data(), vocab);
  }
  return total;
}

// temperature, top-k, top-p, min-p and one draw: the draw walks the kept tokens in id order, so
// the result depends only on the row and u.
int32_t sample_full_vocab(std::span<const float> x, const SamplingParams& p, double u, float max) {
  std::vector<float> w;
  const double total = truncated_weights(x, p, max, w);
  return draw_in_id_order(w, total, u);
}

// Temperature in place, clamped so a huge logit over a small temperature stays finite (exp(x - max)
// needs it).
void apply_temperature(std::span<float> x, float temperature) {
  const float inv_t = 1.0f / temperature;
  if (inv_t != 1.0f)  // (at 1 both operations leave a sanitized logit as it is)
    for (float& v : x) v = std::min(v * inv_t, std::numeric_limits<float>::max());
}

// The row's processing before the draw (sample_row's order): grammar mask, logit_bias,
// penalties, min_tokens.
void process_logits(std::span<float> x, const SamplerRow& row) {
  const SamplingParams& p = *row.params;
  if (!row.allowed_tokens.empty()) apply_allowed_mask(x, row.allowed_tokens);
  if (!p.logit_bias.empty()) apply_logit_bias(x, p.logit_bias);
  apply_penalties(x, row.prompt_token_ids, row.output_token_ids, p.repetition_penalty,
                  p.presence_penalty, p.frequency_penalty);
  if (int64_t(row.output_token_ids.size()) < p.min_tokens) {
    mask_tokens(x, row.eos_token_ids);
    mask_tokens(x, p.stop_token_ids);
  }
}

// Temperature (clamped so a huge logit over a small temperature stays finite: exp(x - max) needs
// it), then the draw; `small_top_k_shortcut` off only for tests.
int32_t sample_random(std::span<float> x, const SamplingParams& p, double u, bool small_top_k_shortcut) {
  apply_temperature(x, p.temperature);
  const float max = max_value(x);
  if (max == kNegInf) return argmax_lowest_id(x);  // everything masked: nothing to draw from
  if (small_top_k_shortcut && p.top_k && size_t(*p.top_k) * 16 < x.size())
    return sample_small_top_k(x, p, u, max, size_t(*p.top_k));
  return sample_full_vocab(x, p, u, max);
}

// The k most likely tokens of a row and their log-probabilities, given the row's log-sum-exp.
std::vector<TokenLogprob> top_logprobs_with_lse(std::span<const float> logits, int32_t k, double lse) {
  // The best k (k <= kMaxTopLogprobs), most likely first.
  const size_t n = std::min(size_t(std::max(k, 0)), logits.size());
  const CandMoreLikely more;
  std::vector<Cand> heap = best_k_heap(logits, n);
  std::sort_heap(heap.begin(), heap.end(), more);  // most likely first
  std::vector<TokenLogprob> out;
  out.reserve(heap.size());
  for (const Cand& c : heap) out.push_back({c.id, float(double(c.x) - lse)});
  return out;
}

}  // namespace

int32_t sample_random_full_vocab(std::span<float> logits, const SamplingParams& p, double u) {
  return sample_random(logits, p, u, /*small_top_k_shortcut=*/false);
}

int32_t argmax_lowest_id(std::span<const float> logits) {
  PYPTO_ASSERT(!logits.empty());
  // Two passes over the row (152k logits per greedy step): the maximum, then the first id holding
  // it (ties -> lowest id). NaNs never get here (sanitize_logits maps them to -inf first).
  const float best = max_value(logits);
  for (size_t k = 0; k < logits.size(); ++k)
    if (logits[k] == best) return int32_t(k);
  return 0;  // every logit is NaN: unreachable after sanitize_logits, id 0 as before
}

std::vector<TokenLogprob> top_logprobs(std::span<const float> logits, int32_t k) {
  return top_logprobs_with_lse(logits, k, log_sum_exp(logits, max_value(logits)));
}

SampledToken sample_row(std::span<float> x, const SamplerRow& row) {
  PYPTO_ASSERT(row.params != nullptr && !x.empty());
  const SamplingParams& p = *row.params;
  sanitize_logits(x);
  SampledToken out;

  // Logprobs describe the raw model distribution, so take what we need before processing.
  double raw_lse = 0.0;
  std::vector<float> raw;
  if (p.logprobs) {
    raw.assign(x.begin(), x.end());
    raw_lse = log_sum_exp(raw, max_value(raw));
    if (*p.logprobs > 0) out.top_logprobs = top_logprobs_with_lse(raw, *p.logprobs, raw_lse);
  }

  process_logits(x, row);

  if (p.is_greedy()) {
    out.token_id = argmax_lowest_id(x);
  } else {
    const double u = philox_uniform(row.seed, uint64_t(row.output_token_ids.size()));
    out.token_id = sample_random(x, p, u, /*small_top_k_shortcut=*/true);
  }
  if (p.logprobs) out.logprob = float(double(raw[out.token_id]) - raw_lse);
  return out;
}

void sampling_distribution(std::span<float> x, const SamplerRow& row, std::vector<float>& probs) {
  PYPTO_ASSERT(row.params != nullptr && !x.empty());
  const SamplingParams& p = *row.params;
  sanitize_logits(x);
  process_logits(x, row);
  probs.assign(x.size(), 0.0f);
  if (p.is_greedy()) {
    probs[size_t(argmax_lowest_id(x))] = 1.0f;
    return;
  }
  apply_temperature(x, p.temperature);
  const float max = max_value(x);
  if (max == kNegInf) {  // everything masked: sample_row returns the argmax (id 0 of all -inf)
    probs[size_t(argmax_lowest_id(x))] = 1.0f;
    return;
  }
  const double total = truncated_weights(x, p, max, probs);
  const double inv = 1.0 / total;
  for (float& v : probs) v = float(double(v) * inv);
}

void raw_logprobs(std::span<const float> raw, int32_t top_n, SampledToken& out) {
  const double lse = log_sum_exp(raw, max_value(raw));
  out.logprob = float(double(raw[size_t(out.token_id)]) - lse);
  if (top_n > 0) out.top_logprobs = top_logprobs_with_lse(raw, top_n, lse);
}

int32_t draw_from_weights(std::span<const float> w, double u) {
  double total = 0.0;
  for (float v : w) total += v > 0.0f ? double(v) : 0.0;
  PYPTO_ASSERT(total > 0.0, "draw_from_weights: no token has weight");
  const double target = u * total;
  double cum = 0.0;
  int32_t last = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (!(w[i] > 0.0f)) continue;
    cum += double(w[i]);
    last = int32_t(i);
    if (target < cum) return last;
  }
  return last;  // rounding left target == total: the last token with weight
}

std::vector<SampledToken> sample_batch(std::span<float> logits, int64_t vocab_size,
                                       std::span<const SamplerRow> rows, const RowRunner& run_rows) {
  PYPTO_ASSERT(vocab_size > 0 && logits.size() == rows.size() * size_t(vocab_size), "logits ",
               logits.size(), " for ", rows.size(), " rows of vocab ", vocab_size);
  std::vector<SampledToken> out(rows.size());
  const int64_t n = int64_t(rows.size());
  auto one = [&](int64_t r) {
    out[size_t(r)] = sample_row(logits.subspan(size_t(r * vocab_size), size_t(vocab_size)), rows[size_t(r)]);
  };
  if (run_rows && n > 1) run_rows(n, one);
  else
    for (int64_t r = 0; r < n; ++r) one(r);
  return out;
}

}  // namespace pypto
