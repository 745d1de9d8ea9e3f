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
  if (b.cost.empty()) b.cost.assign(size_t(max_k_) + 2, -1.0);
  return b;
}

double SpecCostModel::estimate(const Bucket& b, int32_t rows) {
  if (b.cost.empty()) return -1;
  const int32_t n = int32_t(b.cost.size()) - 1;  // rows 1 .. n
  rows = std::clamp(rows, 1, n);
  if (b.cost[size_t(rows)] >= 0) return b.cost[size_t(rows)];
  int32_t lo = rows - 1, hi = rows + 1;
  while (lo >= 1 && b.cost[size_t(lo)] < 0) --lo;
  while (hi <= n && b.cost[size_t(hi)] < 0) ++hi;
  if (lo < 1) return -1;  // no plain step measured
  const double clo = b.cost[size_t(lo)];
  if (hi <= n) return clo + (b.cost[size_t(hi)] - clo) * double(rows - lo) / double(hi - lo);
  int32_t lo2 = lo - 1;  // extrapolate with the slope of the two largest measured rows
  while (lo2 >= 1 && b.cost[size_t(lo2)] < 0) --lo2;
  if (lo2 < 1) return -1;
  const double slope = std::max(0.0, (clo - b.cost[size_t(lo2)]) / double(lo - lo2));
  return clo + slope * double(rows - lo);
}

double SpecCostModel::step_seconds(int32_t batch, int32_t rows) const {
  const Bucket* b = find(batch);
  return b ? estimate(*b, rows) : -1;
}

double SpecCostModel::draft_seconds(int32_t batch) const {
  const Bucket* b = find(batch);
  return b ? b->draft : -1;
}

void SpecCostModel::observe_step(int32_t batch, int32_t rows, double seconds) {
  if (batch <= 0 || rows < 1 || rows > max_k_ + 1 || !(seconds > 0)) return;
  double& c = at(batch).cost[size_t(rows)];
  c = c < 0 ? seconds : c + kEma * (seconds - c);
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

double SpecCostModel::rate(const Bucket& b, std::span<const Candidate> requests, int32_t k) const {
  double tokens = 0;
  int32_t rows = 1;
  for (const Candidate& c : requests) {
    const int32_t ki = std::min(k, c.cap);
    tokens += expected_tokens(c.alpha, ki);
    rows = std::max(rows, 1 + ki);
  }
  const int32_t passes = rows - 1;
  const double verify = estimate(b, rows);
  if (verify <= 0) return -1;
  const double seconds = verify + double(passes) * std::max(0.0, b.draft);
  return tokens / seconds;
}

int32_t SpecCostModel::best_k(std::span<const Candidate> requests) const {
  if (!enabled_) return max_k_;
  const Bucket* b = find(int32_t(requests.size()));
  if (!b) return 0;
  const double plain = rate(*b, requests, 0);
  if (plain <= 0) return 0;
  int32_t best = 0;
  double best_rate = plain;
  for (int32_t k = 1; k <= max_k_; ++k)
    if (const double r = rate(*b, requests, k); r > best_rate) best = k, best_rate = r;
  return best > 0 && best_rate > plain * (1.0 + kMargin) ? best : 0;
}

int32_t SpecCostModel::choose_k(std::span<const Candidate> requests) {
  context_ = true;
  if (!enabled_) return max_k_;
  const bool any = std::any_of(requests.begin(), requests.end(), [](const Candidate& c) { return c.cap > 0; });
  if (!any || max_k_ == 0) return 0;
  const Bucket& b = at(int32_t(requests.size()));
  // Exploration of a new batch size: a plain step (without drafter context, so it costs what
  // plain decoding costs), then one with k = 1.
  if (b.cost[1] < 0) {
    context_ = false;
    return 0;
  }
  if (b.cost[2] < 0) return 1;
  const int32_t best = best_k(requests);
  if (probed_) {  // the step before was a probe: did it change the decision?
    probed_ = false;
    interval_ = (best > 0) != (before_probe_ > 0) ? kFirstProbe : std::min(kMaxProbe, interval_ * 2);
  } else if ((best > 0) != (decision_ > 0)) {
    interval_ = kFirstProbe;  // the decision changed on its own (acceptance or a cost moved)
    since_probe_ = 0;
  }
  decision_ = best;
  if (++since_probe_ >= interval_) {
    since_probe_ = 0;
    probed_ = true;
    before_probe_ = best;
    ++probes_;
    context_ = best == 0;  // a plain probe measures plain decoding: without drafter context
    return best > 0 ? 0 : 1;
  }
  context_ = best > 0 || interval_ - since_probe_ <= kContextLead;
  return best;
}

}  // namespace pypto
