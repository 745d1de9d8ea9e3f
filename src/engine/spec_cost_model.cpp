#include "engine/spec_cost_model.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace pypto {

double expected_tokens(double a, int32_t k) {
  if (k <= 0) return 1.0;
  a = std::clamp(a, 0.0, 1.0);
  if (a > 1.0 - 1e-9) return double(k + 1);
  return (1.0 - std::pow(a, double(k + 1))) / (1.0 - a);
}

void AcceptanceEstimate::observe(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  successes_ = successes_ * kDecay + double(accepted);
  failures_ = failures_ * kDecay + (accepted < drafted ? 1.0 : 0.0);
}

SpecCostModel::SpecCostModel(int32_t max_k, bool enabled) : max_k_(max_k), enabled_(enabled) {
  PYPTO_ASSERT(max_k >= 0, "max_k ", max_k);
  stats_.cost_model = enabled;
  stats_.chosen_k.assign(size_t(max_k) + 1, 0);
}

size_t SpecCostModel::bucket_index(int32_t batch) {
  // 1, 2, 3-4, 5-8, 9-16, ...: the index of the smallest power of two >= batch.
  size_t i = 0;
  while ((int64_t(1) << i) < int64_t(batch)) ++i;
  return i;
}

const SpecCostModel::Bucket* SpecCostModel::find(int32_t batch) const {
  const size_t i = bucket_index(std::max(1, batch));
  return i < buckets_.size() ? &buckets_[i] : nullptr;
}

SpecCostModel::Bucket& SpecCostModel::at(int32_t batch) {
  const size_t i = bucket_index(std::max(1, batch));
  if (buckets_.size() <= i) buckets_.resize(i + 1);
  Bucket& b = buckets_[i];
  if (b.cost.empty()) b.cost.resize(size_t(max_k_) + 2);
  return b;
}

double SpecCostModel::estimate(const Bucket& b, double rows) {
  if (b.cost.empty()) return -1;
  const int32_t n = int32_t(b.cost.size()) - 1;  // grid points 1 .. n
  rows = std::clamp(rows, 1.0, double(n));
  // A step never costs less for having more rows (the same weights are read, more rows
  // computed): a grid point measured below a smaller one counts at the smaller one's cost. On a
  // shared host the two are timed at different moments, and a 2-row step timed in a quiet spell
  // against plain steps timed in a busy one would otherwise make speculation look cheaper than
  // plain decoding, so that drafts which are all rejected still "pay".
  auto cost = [&b](int32_t r) {
    double c = b.cost[size_t(r)].median;
    if (c < 0) return c;  // not measured
    for (int32_t s = 1; s < r; ++s) c = std::max(c, b.cost[size_t(s)].median);
    return c;
  };
  const int32_t r0 = int32_t(std::floor(rows));
  if (double(r0) == rows && cost(r0) >= 0) return cost(r0);
  // The measured grid points around `rows`: lo <= rows <= hi (hi > n: none above).
  int32_t lo = r0, hi = r0 + 1;
  while (lo >= 1 && cost(lo) < 0) --lo;
  while (hi <= n && cost(hi) < 0) ++hi;
  if (lo < 1) return -1;  // no plain step measured
  const double clo = cost(lo);
  if (hi <= n) return clo + (cost(hi) - clo) * (rows - double(lo)) / double(hi - lo);
  int32_t lo2 = lo - 1;  // extrapolate with the slope of the two largest measured rows
  while (lo2 >= 1 && cost(lo2) < 0) --lo2;
  if (lo2 < 1) return double(lo) == rows ? clo : -1;
  const double slope = std::max(0.0, (clo - cost(lo2)) / double(lo - lo2));
  return clo + slope * (rows - double(lo));
}

double SpecCostModel::step_seconds(int32_t batch, double rows) const {
  const Bucket* b = find(batch);
  return b ? estimate(*b, rows) : -1;
}

double SpecCostModel::draft_seconds(int32_t batch) const {
  const Bucket* b = find(batch);
  return b ? b->draft : -1;
}

size_t SpecCostModel::spec_samples(const Bucket& b) {
  size_t n = 0;
  for (size_t r = 2; r < b.cost.size(); ++r) n += b.cost[r].samples.size();
  return n;
}

void SpecCostModel::add_sample(GridPoint& p, double seconds) {
  // Stale: keep the old estimate as one sample, so the new one is not outvoted by old ones.
  if (p.median >= 0 && decode_steps_ - p.last_step > kStale) {
    p.samples.assign(1, p.median);
    p.next = 1;
  }
  if (p.samples.size() < size_t(kWindow)) {
    p.samples.push_back(seconds);
    p.next = p.samples.size() % size_t(kWindow);
  } else {
    p.samples[p.next] = seconds;
    p.next = (p.next + 1) % size_t(kWindow);
  }
  p.last_step = decode_steps_;
  std::vector<double> v = p.samples;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + ptrdiff_t(mid), v.end());
  if (v.size() % 2) {
    p.median = v[mid];
  } else {  // an even count: the mean of the two middle samples
    const double upper = v[mid];
    p.median = 0.5 * (upper + *std::max_element(v.begin(), v.begin() + ptrdiff_t(mid)));
  }
}

void SpecCostModel::observe_step(int32_t batch, double rows, double seconds) {
  if (batch <= 0 || !(rows >= 1.0) || rows > double(max_k_ + 1) || !(seconds > 0)) return;
  Bucket& b = at(batch);
  const int32_t lo = int32_t(std::floor(rows));
  const double f = rows - double(lo);
  if (f < 1e-9) return add_sample(b.cost[size_t(lo)], seconds);
  // Between grid points lo and lo + 1: the sample counts for the nearer one, moved along the
  // current slope; with no estimate at lo + 1 yet, it extrapolates from lo through the sample.
  const double elo = estimate(b, double(lo));
  if (elo < 0) return;  // no plain step measured: nothing to anchor a slope on
  const double ehi = estimate(b, double(lo + 1));
  if (ehi < 0) return add_sample(b.cost[size_t(lo) + 1], std::max(elo, elo + (seconds - elo) / f));
  const int32_t g = f < 0.5 ? lo : lo + 1;
  add_sample(b.cost[size_t(g)], std::max(1e-12, seconds + (double(g) - rows) * (ehi - elo)));
}

void SpecCostModel::observe_drafting(int32_t batch, int32_t passes, double seconds) {
  if (batch <= 0 || passes <= 0 || !(seconds >= 0)) return;
  double& d = at(batch).draft;
  const double per_pass = seconds / double(passes);
  d = d < 0 ? per_pass : d + kEma * (per_pass - d);
}

void SpecCostModel::observe_acceptance(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  global_successes_ = global_successes_ * kGlobalDecay + double(accepted);
  global_failures_ = global_failures_ * kGlobalDecay + (accepted < drafted ? 1.0 : 0.0);
}

double SpecCostModel::global_alpha() const {
  // Uninformed start: one success and one failure (0.5).
  return (global_successes_ + 1.0) / (global_successes_ + global_failures_ + 2.0);
}

SpecCostModel::Plan SpecCostModel::plain_plan(const Bucket& b, std::span<const Candidate> requests) const {
  Plan p;
  p.ks.assign(requests.size(), 0);
  p.seconds = estimate(b, 1.0);
  if (p.seconds > 0) p.rate = double(requests.size()) / p.seconds;
  return p;
}

SpecCostModel::Plan SpecCostModel::best_spec_plan(const Bucket& b, std::span<const Candidate> requests) const {
  Plan best;
  const size_t n = requests.size();
  if (n == 0 || estimate(b, 1.0) <= 0) return best;
  const double draft = std::max(0.0, b.draft);
  struct Position {
    double gain;  // expected tokens this draft adds: a_i^j
    int32_t j;
    uint32_t i;
  };
  std::vector<Position> order;
  int32_t best_passes = 0;
  size_t best_count = 0;
  for (int32_t passes = 1; passes <= max_k_; ++passes) {
    order.clear();
    for (size_t i = 0; i < n; ++i) {
      const double a = std::clamp(requests[i].alpha, 0.0, 1.0);
      for (int32_t j = 1; j <= std::min(passes, requests[i].cap); ++j)
        order.push_back({std::pow(a, double(j)), j, uint32_t(i)});
    }
    if (order.empty()) break;  // no request may draft
    // Highest gain first; ties by position, so a request's j-th draft never precedes its (j-1)-th.
    std::sort(order.begin(), order.end(), [](const Position& x, const Position& y) {
      return x.gain != y.gain ? x.gain > y.gain : x.j != y.j ? x.j < y.j : x.i < y.i;
    });
    double tokens = double(n);
    int32_t longest = 0;
    for (size_t c = 0; c < order.size(); ++c) {
      tokens += order[c].gain;
      longest = std::max(longest, order[c].j);
      const double verify = estimate(b, 1.0 + double(c + 1) / double(n));
      if (verify <= 0) return Plan{};
      const double seconds = verify + double(longest) * draft;
      if (const double r = tokens / seconds; r > best.rate) {
        best.rate = r, best.seconds = seconds;
        best_passes = passes, best_count = c + 1;
      }
    }
  }
  if (best_count == 0) return best;
  // Rebuild the winning prefix.
  order.clear();
  for (size_t i = 0; i < n; ++i)
    for (int32_t j = 1; j <= std::min(best_passes, requests[i].cap); ++j)
      order.push_back({std::pow(std::clamp(requests[i].alpha, 0.0, 1.0), double(j)), j, uint32_t(i)});
  std::sort(order.begin(), order.end(), [](const Position& x, const Position& y) {
    return x.gain != y.gain ? x.gain > y.gain : x.j != y.j ? x.j < y.j : x.i < y.i;
  });
  best.ks.assign(n, 0);
  for (size_t c = 0; c < best_count; ++c) ++best.ks[order[c].i];
  return best;
}

std::vector<int32_t> SpecCostModel::decide(const Bucket& b, std::span<const Candidate> requests,
                                           SpecCostStats* record) const {
  const Plan plain = plain_plan(b, requests);
  if (plain.rate <= 0) return plain.ks;
  Plan spec = best_spec_plan(b, requests);
  if (record) {
    record->plain_step_s = plain.seconds;
    record->plain_tokens_per_s = plain.rate;
    record->spec_step_s = spec.seconds;
    record->spec_tokens_per_s = spec.rate;
  }
  return spec.rate > plain.rate * (1.0 + kMargin) ? spec.ks : plain.ks;
}

std::vector<int32_t> SpecCostModel::best(std::span<const Candidate> requests) const {
  if (!enabled_) {
    std::vector<int32_t> ks;
    for (const Candidate& c : requests) ks.push_back(std::clamp(c.cap, 0, max_k_));
    return ks;
  }
  const Bucket* b = find(int32_t(requests.size()));
  if (!b) return std::vector<int32_t>(requests.size(), 0);
  return decide(*b, requests, nullptr);
}

int32_t SpecCostModel::best_k(std::span<const Candidate> requests) const {
  const std::vector<int32_t> ks = best(requests);
  return ks.empty() ? 0 : *std::max_element(ks.begin(), ks.end());
}

int32_t SpecCostModel::choose_k(std::span<const Candidate> requests) {
  const std::vector<int32_t> ks = choose(requests);
  return ks.empty() ? 0 : *std::max_element(ks.begin(), ks.end());
}

void SpecCostModel::count(std::span<const int32_t> ks) {
  int32_t longest = 0;
  for (const int32_t k : ks) {
    ++stats_.chosen_k[size_t(std::clamp(k, 0, max_k_))];
    longest = std::max(longest, k);
  }
  stats_.last_k = longest;
  ++(longest > 0 ? stats_.steps_speculating : stats_.steps_plain);
}

std::vector<int32_t> SpecCostModel::choose(std::span<const Candidate> requests) {
  context_ = true;
  std::vector<int32_t> ks(requests.size(), 0);
  const bool any = std::any_of(requests.begin(), requests.end(), [](const Candidate& c) { return c.cap > 0; });
  if (!any || max_k_ == 0) return ks;
  ++decode_steps_;
  if (!enabled_) {
    ks = best(requests);
    stats_.speculating = true;
    count(ks);
    return ks;
  }
  const Bucket& b = at(int32_t(requests.size()));
  // Exploration of a new batch size: a plain step (without drafter context, so it costs what
  // plain decoding costs), then one speculative step: every request at its cap (the longest k)
  // unless the engine's drafts have mostly been rejected so far, then at k = 1.
  if (b.cost[1].median < 0) {
    context_ = false;
    count(ks);
    return ks;
  }
  if (spec_samples(b) == 0) {
    const int32_t explore = global_alpha() >= kExploreLongest ? max_k_ : 1;
    for (size_t i = 0; i < ks.size(); ++i) ks[i] = std::clamp(requests[i].cap, 0, explore);
    count(ks);
    return ks;
  }
  std::vector<int32_t> chosen = decide(b, requests, &stats_);
  if (std::all_of(chosen.begin(), chosen.end(), [](int32_t k) { return k == 0; }) &&
      spec_samples(b) < kConfirm) {
    // Plain wins, but on fewer than kConfirm speculative step times: unless it wins by more than
    // the host's noise, speculate once more (the median then rests on more samples).
    const Plan plain = plain_plan(b, requests), spec = best_spec_plan(b, requests);
    if (spec.rate > 0 && spec.rate >= plain.rate * (1.0 - kNoise)) chosen = spec.ks;
  }
  const int32_t best = chosen.empty() ? 0 : *std::max_element(chosen.begin(), chosen.end());
  if (probed_) {  // the step before was a probe: did it change the decision?
    probed_ = false;
    interval_ = (best > 0) != (before_probe_ > 0) ? kFirstProbe : std::min(kMaxProbe, interval_ * 2);
  } else if ((best > 0) != (decision_ > 0)) {
    interval_ = kFirstProbe;  // the decision changed on its own (acceptance or a cost moved)
    since_probe_ = 0;
  }
  decision_ = best;
  stats_.speculating = best > 0;
  if (++since_probe_ >= interval_) {
    since_probe_ = 0;
    probed_ = true;
    before_probe_ = best;
    ++stats_.probes;
    context_ = best == 0;  // a plain probe measures plain decoding: without drafter context
    if (best == 0)
      for (size_t i = 0; i < ks.size(); ++i) ks[i] = std::min(1, requests[i].cap);
    count(ks);
    return ks;
  }
  context_ = best > 0 || interval_ - since_probe_ <= kContextLead;
  count(chosen);
  return chosen;
}

}  // namespace pypto
