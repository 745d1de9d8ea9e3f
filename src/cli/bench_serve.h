#pragma once
// `bench serve`: the load generator. Sends a dataset's requests to an OpenAI-compatible server at
// Poisson (gamma, with burstiness) arrival times, at most `max_concurrency` in flight, and
// collects each request's client-side timeline.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cli/bench_client.h"
#include "cli/bench_dataset.h"
#include "cli/bench_spec_decode.h"
#include "cli/bench_stats.h"

namespace pypto::bench {

// Send times (seconds from the start) of n requests: the first at 0, then gaps drawn from a gamma
// distribution of shape `burstiness` and mean 1/rate (burstiness 1 = Poisson), from a
// mt19937_64 seeded with `seed`. rate = +inf: every request at 0.
std::vector<double> arrival_times(size_t n, double rate, double burstiness, uint64_t seed);

struct ServeRunOptions {
  Endpoint endpoint;
  double request_rate = INFINITY;
  double burstiness = 1.0;
  int max_concurrency = 0;  // 0: no limit
  uint64_t seed = 0;
  bool progress = true;
};

struct ServeRun {
  int max_concurrency = 0;
  std::vector<RequestTiming> requests;  // in dataset order
  ServeMetrics metrics;
  // The server's speculative-decoding counters over the run (/metrics), when it speculates.
  std::optional<SpecDecodeCounters> spec_decode;
};

ServeRun run_serve_benchmark(const std::vector<DatasetRequest>& data, const ServeRunOptions& o);

}  // namespace pypto::bench
