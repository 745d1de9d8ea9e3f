// Compute peaks on all benchmark threads: AVX512_BF16 dot products and AVX-512 f32 FMA.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <time.h>

#include <chrono>
#include <numeric>
#include <vector>

#include "bench_common.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace pypto::bench {
namespace {

bool has_avx512_bf16() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512_bf16;
}

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// flops/s of `loop` run concurrently on every thread (median of 5 passes). On a machine shared
// with other processes the wall-clock rate undercounts, so the rate per thread-CPU-second times
// the thread count (what the cores do while they are ours) is kept too.
struct Peak {
  double wall = 0, per_cpu = 0;
};
Peak peak_of(int64_t (*loop)(int64_t)) {
  const int nt = bench_threads();
  std::vector<int> cores(nt);
  std::iota(cores.begin(), cores.end(), 0);
  ThreadPool pool(nt, cores);
  const int64_t iters = 4'000'000;
  std::vector<double> rates, cpu_rates;
  for (int r = 0; r < 5; ++r) {
    std::vector<int64_t> macs(nt);
    std::vector<double> cpu(nt);
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(nt, [&](int64_t b, int64_t e, int tid) {
      double c0 = thread_cpu_s();
      macs[tid] = loop(iters);
      cpu[tid] = thread_cpu_s() - c0;
    });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(2.0 * std::accumulate(macs.begin(), macs.end(), int64_t(0)) / s);
    cpu_rates.push_back(2.0 * macs[0] / cpu[0] * nt);
  }
  std::sort(rates.begin(), rates.end());
  std::sort(cpu_rates.begin(), cpu_rates.end());
  return {rates[rates.size() / 2], cpu_rates[cpu_rates.size() / 2]};
}

Peak bf16_peak() {
  static Peak v = has_avx512_bf16() ? peak_of(bf16_dot_loop) : Peak{};
  return v;
}
Peak f32_peak() {
  static Peak v = has_avx512_bf16() ? peak_of(f32_fma_loop) : Peak{};
  return v;
}

}  // namespace

// The uncontended estimate: the figure the cores reach, which is what a kernel's % is relative to.
double bf16_peak_flops() { return bf16_peak().per_cpu; }
double f32_peak_flops() { return f32_peak().per_cpu; }

namespace {

void BM_PeakBf16Dot(benchmark::State& state) {
  if (!has_avx512_bf16()) return state.SkipWithError("no AVX512_BF16");
  for (auto _ : state) benchmark::DoNotOptimize(bf16_peak_flops());
  state.counters["GFLOP/s_wall"] = bf16_peak().wall / 1e9;
  state.counters["GFLOP/s_cpu"] = bf16_peak().per_cpu / 1e9;
  state.counters["threads"] = bench_threads();
}
BENCHMARK(BM_PeakBf16Dot)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_PeakF32Fma(benchmark::State& state) {
  if (!has_avx512_bf16()) return state.SkipWithError("no AVX-512");
  for (auto _ : state) benchmark::DoNotOptimize(f32_peak_flops());
  state.counters["GFLOP/s_wall"] = f32_peak().wall / 1e9;
  state.counters["GFLOP/s_cpu"] = f32_peak().per_cpu / 1e9;
  state.counters["threads"] = bench_threads();
}
BENCHMARK(BM_PeakF32Fma)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pypto::bench
