#pragma once
// Server-side Prometheus metrics under vLLM's names (prefix "vllm:", labels model_name and
// engine = replica index) so existing dashboards and autoscalers work. Text exposition format
// 0.0.4. Counters are written with the "_total" suffix as prometheus_client does.
//
// Clocks: TTFT is measured from the HTTP request's arrival (before tokenization) to the first
// output of a sequence; ITL between successive outputs of a sequence; e2e from arrival to the
// final output. All on the steady clock.
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace pypto {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  // Appends name_bucket{...,le=...}, name_sum and name_count lines.
  void render(std::string& out, const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), last = +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

// Gauges read from the engines when /metrics is scraped.
struct EngineGauges {
  int64_t num_requests_running = 0;
  int64_t num_requests_waiting = 0;
  int64_t num_active_requests = 0;  // as the engine loop counts them (pypto:engine_active_requests)
  double kv_cache_usage = 0;        // fraction of KV blocks held by requests
  int64_t num_preemptions = 0;      // cumulative (exposed as a counter)
  int64_t prefix_cache_queries = 0; // tokens looked up (counter)
  int64_t prefix_cache_hits = 0;    // of those, found (counter)
};

class ServerMetrics {
 public:
  ServerMetrics(size_t num_engines, int64_t max_model_len);

  void observe_ttft(size_t engine, double seconds);
  void observe_itl(size_t engine, double seconds);
  void add_generation_tokens(size_t engine, int64_t n);
  // One finished sequence (a request with n > 1 counts n times, as in vLLM v1).
  void request_finished(size_t engine, const std::string& finish_reason, int64_t prompt_tokens,
                        int64_t generation_tokens, double e2e_seconds);
  void request_rejected(const std::string& reason);

  std::string render(const std::string& model_name, const std::vector<EngineGauges>& gauges) const;

  // For tests.
  uint64_t num_finished(const std::string& finish_reason) const;

 private:
  struct PerEngine {
    explicit PerEngine(int64_t max_model_len);
    std::map<std::string, uint64_t> success;  // finished_reason -> count
    uint64_t prompt_tokens = 0;
    uint64_t generation_tokens = 0;
    Histogram ttft, itl, e2e, prompt_len, generation_len;
  };
  mutable std::mutex mu_;
  std::vector<PerEngine> engines_;
  std::map<std::string, uint64_t> rejected_;
};

}  // namespace pypto
