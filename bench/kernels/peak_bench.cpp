// Compute-peak benchmarks (the measurement itself is in peaks.cpp): AVX512_BF16 dot products,
// AVX-512 f32 FMA, AMX-BF16 and AMX-INT8 tile products, on all benchmark threads.
#include <benchmark/benchmark.h>

#include <string>

#include "bench_common.h"
#include "core/cpu_features.h"
#include "peaks.h"

namespace pypto::bench {
namespace {

void BM_PeakBf16Dot(benchmark::State& state) {
  if (bf16_peak_flops() == 0) return state.SkipWithError("no AVX512_BF16");
  for (auto _ : state) benchmark::DoNotOptimize(bf16_peak_flops());
  state.counters["GFLOP/s_wall"] = bf16_peak().wall / 1e9;
  state.counters["GFLOP/s_cpu"] = bf16_peak().per_cpu / 1e9;
  state.counters["threads"] = bench_threads();
}
BENCHMARK(BM_PeakBf16Dot)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_PeakF32Fma(benchmark::State& state) {
  if (f32_peak_flops() == 0) return state.SkipWithError("no AVX-512");
  for (auto _ : state) benchmark::DoNotOptimize(f32_peak_flops());
  state.counters["GFLOP/s_wall"] = f32_peak().wall / 1e9;
  state.counters["GFLOP/s_cpu"] = f32_peak().per_cpu / 1e9;
  state.counters["threads"] = bench_threads();
}
BENCHMARK(BM_PeakF32Fma)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_PeakAmxBf16(benchmark::State& state) {
  if (!amx_usable()) return state.SkipWithError(("no AMX: " + amx_status()).c_str());
  for (auto _ : state) benchmark::DoNotOptimize(amx_bf16_peak_flops());
  state.counters["GFLOP/s_wall"] = amx_bf16_peak().wall / 1e9;
  state.counters["GFLOP/s_cpu"] = amx_bf16_peak().per_cpu / 1e9;
  state.counters["threads"] = bench_threads();
}
BENCHMARK(BM_PeakAmxBf16)->Iterations(1)->Unit(benchmark::kMillisecond);

void BM_PeakAmxInt8(benchmark::State& state) {
  if (!amx_usable()) return state.SkipWithError(("no AMX: " + amx_status()).c_str());
  for (auto _ : state) benchmark::DoNotOptimize(amx_int8_peak_ops());
  state.counters["GOP/s_wall"] = amx_int8_peak().wall / 1e9;
  state.counters["GOP/s_cpu"] = amx_int8_peak().per_cpu / 1e9;
  state.counters["threads"] = bench_threads();
}
BENCHMARK(BM_PeakAmxInt8)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace pypto::bench
