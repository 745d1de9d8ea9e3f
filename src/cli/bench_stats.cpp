#include "cli/bench_stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace pypto::bench {

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * double(v.size() - 1);
  const size_t lo = size_t(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - double(lo));
}

Summary summarize(const std::vector<double>& v, const std::vector<double>& ps) {
  Summary s;
  s.count = v.size();
  if (v.empty()) {
    for (double p : ps) s.percentiles.emplace_back(p, 0.0);
    return s;
  }
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / double(v.size());
  double sq = 0;
  for (double x : v) sq += (x - s.mean) * (x - s.mean);
  s.stdev = std::sqrt(sq / double(v.size()));
  s.median = percentile(v, 50);
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  for (double p : ps) s.percentiles.emplace_back(p, percentile(v, p));
  return s;
}

double request_tpot_s(const RequestTiming& r) {
  if (r.output_tokens <= 1) return -1;
  return (r.latency_s - r.ttft_s) / double(r.output_tokens - 1);
}

ServeMetrics compute_serve_metrics(const std::vector<RequestTiming>& results, double duration_s,
                                   const std::vector<double>& ps) {
  ServeMetrics m;
  m.duration_s = duration_s;
  for (const RequestTiming& r : results) {
    if (!r.success) {
      m.failed++;
      continue;
    }
    m.completed++;
    m.total_input += r.prompt_len;
    m.total_output += r.output_tokens;
    m.ttfts_ms.push_back(r.ttft_s * 1e3);
    m.e2els_ms.push_back(r.latency_s * 1e3);
    if (double t = request_tpot_s(r); t >= 0) m.tpots_ms.push_back(t * 1e3);
    for (double g : r.itl_s) m.itls_ms.push_back(g * 1e3);
  }
  if (duration_s > 0) {
    m.request_throughput = double(m.completed) / duration_s;
    m.output_throughput = double(m.total_output) / duration_s;
    m.total_token_throughput = double(m.total_input + m.total_output) / duration_s;
  }
  m.ttft_ms = summarize(m.ttfts_ms, ps);
  m.tpot_ms = summarize(m.tpots_ms, ps);
  m.itl_ms = summarize(m.itls_ms, ps);
  m.e2el_ms = summarize(m.e2els_ms, ps);
  return m;
}

nlohmann::ordered_json summary_json(const Summary& s) {
  nlohmann::ordered_json j{{"count", s.count}, {"mean", s.mean}, {"median", s.median},
                           {"std", s.stdev},   {"min", s.min},   {"max", s.max}};
  for (const auto& [p, v] : s.percentiles) {
    char key[32];
    std::snprintf(key, sizeof key, "p%g", p);
    j[key] = v;
  }
  return j;
}

nlohmann::ordered_json metrics_json(const ServeMetrics& m) {
  return {{"completed", m.completed},
          {"failed", m.failed},
          {"duration_s", m.duration_s},
          {"total_input_tokens", m.total_input},
          {"total_output_tokens", m.total_output},
          {"request_throughput", m.request_throughput},
          {"output_throughput", m.output_throughput},
          {"total_token_throughput", m.total_token_throughput},
          {"ttft_ms", summary_json(m.ttft_ms)},
          {"tpot_ms", summary_json(m.tpot_ms)},
          {"itl_ms", summary_json(m.itl_ms)},
          {"e2el_ms", summary_json(m.e2el_ms)}};
}

}  // namespace pypto::bench
