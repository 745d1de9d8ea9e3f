// Memory bandwidth over >= 1 GiB on all benchmark threads: read-only sum (the decode bound) and
// STREAM triad. Reports the median and best of the passes in GB/s (1e9 bytes/s).
#include <benchmark/benchmark.h>

#include "bench_common.h"

namespace pypto::bench {
namespace {

void BM_ReadBandwidth(benchmark::State& state) {
  Rate r;
  for (auto _ : state) r = read_bandwidth(size_t(1) << 30, 7);
  state.counters["GB/s_median"] = r.median / 1e9;
  state.counters["GB/s_best"] = r.best / 1e9;
  state.counters["threads"] = bench_threads();
}
BENCHMARK(BM_ReadBandwidth)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_TriadBandwidth(benchmark::State& state) {
  Rate r;
  for (auto _ : state) r = triad_bandwidth(size_t(384) << 20, 7);  // 3 × 384 MiB
  state.counters["GB/s_median"] = r.median / 1e9;
  state.counters["GB/s_best"] = r.best / 1e9;
  state.counters["threads"] = bench_threads();
}
BENCHMARK(BM_TriadBandwidth)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pypto::bench
