// Memory bandwidth over >= 1 GiB on all benchmark threads: read-only sum (the decode bound),
// STREAM triad, and reads in shuffled runs (decode attention's pattern). Reports the median and
// best of the passes in GB/s (1e9 bytes/s).
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

// Runs of 4 KiB (one KV head's K or V rows of a 16-token bf16 block at head_dim 128) or 32 KiB
// (all 8 KV heads of the block) in shuffled order, with 0, 4 or 64 lines of the next run
// prefetched: how fast DRAM delivers decode attention's access pattern, beside BM_ReadBandwidth.
void BM_RunReadBandwidth(benchmark::State& state) {
  Rate r;
  for (auto _ : state) r = run_read_bandwidth(size_t(1) << 30, size_t(state.range(0)), int(state.range(1)), 5);
  state.counters["GB/s_median"] = r.median / 1e9;
  state.counters["GB/s_best"] = r.best / 1e9;
  state.counters["threads"] = bench_threads();
}
BENCHMARK(BM_RunReadBandwidth)->ArgsProduct({{4096, 32768}, {0, 4, 64}})->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pypto::bench
