#pragma once
// Server-side Prometheus metrics under vLLM's names (prefix "vllm:", labels model_name and
// engine = replica index) so existing dashboards and autoscalers work. Text exposition format
// 0.0.4. Counters are written with the "_total" suffix as prometheus_client does.
//
// Clocks: TTFT is measured from the HTTP request's arrival (before tokenization) to the first
// output of a sequence; ITL between successive outputs of a sequence; e2e from arrival to the
// final output. All on the steady clock.
//
// The per-request phase histograms (queue, prefill, decode, inference, time per output token)
// use the engine's own timestamps (RequestTimes), as vLLM's use its engine core's: they cover the
// part of e2e the engine sees, from the engine loop's arrival to the step that produced the last
// token, and exclude tokenization and the HTTP hand-off on either side.
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/spec_cost_stats.h"

namespace pypto {

// vLLM's FinishedRequestStats timing of one finished sequence, in seconds. What exists depends on
// how far the sequence got (as in vLLM's ScheduledTiming / CompletedTiming): queue once it was
// scheduled; prefill, decode and inference once it produced a token; time per output token once
// it produced two (the first token belongs to prefill).
//   queue     = arrival -> first scheduled (a preempted sequence keeps its first scheduling)
//   prefill   = first scheduled -> first token
//   decode    = first token -> last token
//   inference = first scheduled -> last token  (= prefill + decode)
//   time per output token = decode / (output tokens - 1)
struct RequestPhaseTimes {
  std::optional<double> queue, prefill, decode, inference, time_per_output_token;
};
RequestPhaseTimes request_phase_times(const RequestTimes& t, int64_t num_output_tokens);

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
  // Hybrid models (engine/state_snapshots.h): hits resumed from a state snapshot, snapshots taken,
  // snapshots evicted for newer ones, and verified cached tokens no snapshot let a hit use.
  int64_t state_snapshot_restores = 0;
  int64_t state_snapshots_saved = 0;
  int64_t state_snapshots_evicted = 0;
  int64_t prefix_cache_tokens_without_state = 0;
  PrefillProgress prefill;  // prompts being prefilled, and prompt tokens computed (counter)
  // Speculative decoding (engine/spec_decode_stats.h); exported only when it is on.
  bool speculative = false;
  int32_t num_speculative_tokens = 0;  // k
  SpecDecodeStats spec_decode;
  SpecCostStats spec_cost;  // the cost model's decisions (engine/spec_cost_stats.h)
};

class ServerMetrics {
 public:
  ServerMetrics(size_t num_engines, int64_t max_model_len);

  void observe_ttft(size_t engine, double seconds);
  void observe_itl(size_t engine, double seconds);
  void add_generation_tokens(size_t engine, int64_t n);
  // One finished sequence (a request with n > 1 counts n times, as in vLLM v1). Each phase
  // histogram observes the phase when `phases` has it.
  void request_finished(size_t engine, const std::string& finish_reason, int64_t prompt_tokens,
                        int64_t generation_tokens, double e2e_seconds, const RequestPhaseTimes& phases = {});
  void request_rejected(const std::string& reason);
  // One HTTP request of a pooling endpoint ("embeddings", "rerank", "score") with its inputs: the
  // pypto:pooling_requests_total and pypto:pooling_inputs_total counters (each input is also one
  // finished request of vllm:request_success_total, with 0 generation tokens).
  void pooling_request(const std::string& endpoint, int64_t inputs);

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
    Histogram queue, prefill, decode, inference, tpot;  // RequestPhaseTimes
  };
  mutable std::mutex mu_;
  std::vector<PerEngine> engines_;
  std::map<std::string, uint64_t> rejected_;
  std::map<std::string, std::pair<uint64_t, uint64_t>> pooling_;  // endpoint -> requests, inputs
};

}  // namespace pypto
