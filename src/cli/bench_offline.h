#pragma once
// The in-process benchmarks: `bench latency` (a batch of fresh random prompts, repeated: prefill
// time and TPOT, warm-up iterations excluded) and `bench throughput` (many requests at once:
// output tokens/s). Both drive a loaded EngineLoop exactly as offline mode does.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/bench_stats.h"
#include "core/profiler.h"
#include "engine/engine_loop.h"

namespace pypto::bench {

struct LatencyOptions {
  int64_t input_len = 32, output_len = 128;
  int batch_size = 1;
  int num_iters = 10, num_iters_warmup = 1;
  uint64_t seed = 0;
  bool progress = true;
  // Recording level during the measured iterations (warm-up never recorded); the caller
  // collects the trace afterwards. Off: the hooks cost one branch each.
  prof::Level profile_level = prof::Level::Off;
};

struct LatencyIteration {
  double prefill_s = 0;     // submit → the last request of the batch has its first token
  double e2e_s = 0;         // submit → every request finished
  double tpot_s = 0;        // mean over the batch of (e2e − ttft) / (output − 1)
  int64_t output_tokens = 0;
};

struct LatencyResult {
  std::vector<LatencyIteration> iterations;  // measured ones (warm-up excluded)
  Summary prefill_ms, tpot_ms, e2e_ms;
  double prefill_tokens_per_s = 0;  // batch·input_len / mean prefill
  double decode_tokens_per_s = 0;   // batch / mean TPOT
};

struct ThroughputOptions {
  int64_t num_prompts = 64;
  int64_t input_len = 32, output_len = 128;
  double range_ratio = 0.0;
  uint64_t seed = 0;
  bool progress = true;
};

struct ThroughputResult {
  int64_t requests = 0, input_tokens = 0, output_tokens = 0;
  double elapsed_s = 0;
  double requests_per_s = 0, output_tokens_per_s = 0, total_tokens_per_s = 0;
  std::vector<double> e2e_ms;  // per request, for the distribution plot
  std::vector<double> ttft_ms;
};

// Random prompt ids in [0, id_limit) (no tokenizer round trip: the engine takes ids).
std::vector<int32_t> random_prompt_ids(int64_t len, int32_t id_limit, uint64_t seed);

LatencyResult run_latency_benchmark(EngineLoop& loop, int32_t id_limit, const LatencyOptions& o);
ThroughputResult run_throughput_benchmark(EngineLoop& loop, int32_t id_limit, const ThroughputOptions& o);

nlohmann::ordered_json latency_json(const LatencyResult& r);
nlohmann::ordered_json throughput_json(const ThroughputResult& r);

}  // namespace pypto::bench
