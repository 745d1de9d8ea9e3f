#pragma once
// Statistics of the serving benchmark, with the definitions of vLLM's `vllm bench serve`
// (vllm/benchmarks/serve.py calculate_metrics), so both tools give the same numbers for the same
// timelines:
//   TTFT  per request: send → first chunk carrying choices (even with empty text).
//   ITL   per chunk:   gap between consecutive choices-carrying chunks; pooled over requests.
//   TPOT  per request: (e2e − ttft) / (output_tokens − 1); requests with ≤ 1 output token are
//                      left out of the TPOT statistics.
//   E2EL  per request: send → last choices-carrying chunk.
//   throughputs: Σ over successful requests / benchmark duration (first send → last completion).
// Percentiles interpolate linearly between order statistics (numpy's default).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pypto::bench {

// What the client saw of one request.
struct RequestTiming {
  bool success = false;
  std::string error;
  int64_t prompt_len = 0;
  int64_t output_tokens = 0;   // usage.completion_tokens (or counted chunks when absent)
  double send_s = 0;           // when the POST was issued, seconds since the benchmark started
  double ttft_s = 0;
  double latency_s = 0;        // e2e
  std::vector<double> itl_s;   // gaps between chunks after the first
};

struct Summary {
  size_t count = 0;
  double mean = 0, median = 0, stdev = 0, min = 0, max = 0;
  std::vector<std::pair<double, double>> percentiles;  // (p, value)
};

// p in [0, 100]; linear interpolation between closest ranks. Empty input → 0.
double percentile(std::vector<double> values, double p);
// Population standard deviation (numpy's np.std default, as vLLM reports).
Summary summarize(const std::vector<double>& values, const std::vector<double>& ps = {50, 90, 99});

struct ServeMetrics {
  size_t completed = 0, failed = 0;
  int64_t total_input = 0, total_output = 0;
  double duration_s = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  Summary ttft_ms, tpot_ms, itl_ms, e2el_ms;
  // Raw per-request values (ms), kept for the report's plots.
  std::vector<double> ttfts_ms, tpots_ms, itls_ms, e2els_ms;
};

// TPOT of one request in seconds, or a negative value when it has ≤ 1 output token.
double request_tpot_s(const RequestTiming& r);
ServeMetrics compute_serve_metrics(const std::vector<RequestTiming>& results, double duration_s,
                                   const std::vector<double>& ps = {50, 90, 99});

nlohmann::ordered_json summary_json(const Summary& s);
nlohmann::ordered_json metrics_json(const ServeMetrics& m);

}  // namespace pypto::bench
