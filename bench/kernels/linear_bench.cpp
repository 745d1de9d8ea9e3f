// The backend's linear at Qwen3-0.6B shapes (bf16 weights, f32 activations):
//   GEMV (m = 1, decode): weight GB/s and % of the read-bandwidth bound. Several copies of the
//     weight (>= 256 MiB in all) are cycled so each call streams from DRAM, as in a real decode
//     where 1.2 GB of weights pass per token, not from the 32 MiB L3.
//   GEMM (m = 128, 512, prefill): GFLOP/s and % of the f32-FMA and bf16-dot peaks.
//   Every kernel path (f32 FMA; bf16 dot product and AMX tiles at high and medium) at m = 1, 16
//   and 512, against its own measured peak: BM_GemmPath; the AMX-INT8 core: BM_AmxInt8Gemm.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "bench_common.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/int8_panels.h"
#include "kernels/cpu/kernel_table.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"

namespace pypto::bench {
namespace {

// Best repetition: on a machine shared with other processes the fastest pass is the least disturbed.
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

struct LinearShape {
  const char* name;
  int64_t n, k;
};
const LinearShape kShapes[] = {
    {"qkv_1024x4096", 2048 + 1024 + 1024, 1024},
    {"gate_up_1024x6144", 2 * 3072, 1024},
    {"down_3072x1024", 1024, 3072},
    {"lm_head_1024x151936", 151936, 1024},
};

// precision 0: f32 activations (the default backend), 1: split hi+lo bf16, 2: bf16.
Backend& backend(int precision = 0) {
  static std::unique_ptr<Backend> b[3];
  if (!b[precision]) {
    std::vector<int> cores(bench_threads());
    for (int i = 0; i < bench_threads(); ++i) cores[i] = i;
    CpuBackendOptions o;
    o.split_bf16_activations = precision == 1;
    o.bf16_activations = precision == 2;
    b[precision] = make_cpu_backend_for_isa(cpu_isa(), bench_threads(), cores, o);
  }
  return *b[precision];
}

struct Weights {
  std::vector<AlignedBuffer> copies;
  std::vector<LinearWeight> w;
};

// At least `min_total` bytes of copies (so that cycling through them reads W from memory), each
// in the run-time layout of `be`.
Weights make_weights(const LinearShape& s, size_t min_total, Backend& be = backend()) {
  Weights out;
  const size_t bytes = be.packed_weight_bytes(DType::BF16, s.n, s.k);
  const size_t copies = std::max<size_t>(1, (min_total + bytes - 1) / bytes);
  std::vector<uint16_t> plain(s.n * s.k);
  uint32_t state = 12345;
  for (auto& v : plain) {
    state = state * 1664525u + 1013904223u;
    v = f32_to_bf16(static_cast<float>(static_cast<int32_t>(state >> 8) - (1 << 23)) / float(1 << 27));
  }
  for (size_t c = 0; c < copies; ++c) {
    out.copies.emplace_back(bytes);
    be.pack_weight(plain.data(), DType::BF16, s.n, s.k, out.copies.back().data());
    out.w.push_back({out.copies.back().data(), DType::BF16, s.n, s.k});
  }
  return out;
}

void BM_Gemv(benchmark::State& state) {
  const LinearShape& s = kShapes[state.range(0)];
  Weights w = make_weights(s, size_t(256) << 20);
  std::vector<float> x(s.k, 0.01f), y(s.n);
  size_t i = 0;
  for (auto _ : state) {
    backend().linear(x.data(), 1, w.w[i], nullptr, y.data());
    i = (i + 1) % w.w.size();
    benchmark::ClobberMemory();
  }
  const double bytes = double(s.n) * s.k * 2;
  state.SetLabel(std::string(s.name) + " " + backend().name());
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pct_bound"] =
      benchmark::Counter(100.0 * bytes / bandwidth_bound(), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Gemv)->DenseRange(0, 3)->Repetitions(5)->ReportAggregatesOnly(true)
    ->ComputeStatistics("max", max_of)->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

void BM_Gemm(benchmark::State& state) {
  const LinearShape& s = kShapes[state.range(0)];
  const int64_t m = state.range(1);
  Weights w = make_weights(s, 0);
  std::vector<float> x(m * s.k, 0.01f), y(m * s.n);
  for (auto _ : state) {
    backend().linear(x.data(), m, w.w[0], nullptr, y.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * m * s.n * s.k;
  state.SetLabel(std::string(s.name) + " " + backend().name());
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  if (f32_peak_flops() > 0) {
    state.counters["pct_f32_peak"] =
        benchmark::Counter(100.0 * flops / f32_peak_flops(), benchmark::Counter::kIsIterationInvariantRate);
    state.counters["pct_bf16_peak"] =
        benchmark::Counter(100.0 * flops / bf16_peak_flops(), benchmark::Counter::kIsIterationInvariantRate);
  }
}
BENCHMARK(BM_Gemm)->ArgsProduct({{0, 1, 2}, {128, 512}})->Repetitions(5)->ReportAggregatesOnly(true)
    ->ComputeStatistics("max", max_of)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// Every kernel path of this CPU at m = 1 (a decode step), 16 (16 sequences decoding) and 512 (a
// prefill): GFLOP/s and % of the peak of the path's own instructions, measured in the same run
// (bench_common.h matrix_peak_flops). Paths the CPU lacks are skipped, saying why. At m <= 16 W
// comes from memory, as in the model: copies of 256 MiB in all, cycled.
struct Path {
  const char* label;
  int precision;  // as backend()
  CpuLinearKernel kernel;
};
const Path kPaths[] = {{"f32", 0, CpuLinearKernel::F32},
                       {"bf16dot-high", 1, CpuLinearKernel::Bf16Dot},
                       {"bf16dot-medium", 2, CpuLinearKernel::Bf16Dot},
                       {"amx-high", 1, CpuLinearKernel::Amx},
                       {"amx-medium", 2, CpuLinearKernel::Amx}};

void BM_GemmPath(benchmark::State& state) {
  const LinearShape& s = kShapes[state.range(0)];
  const int64_t m = state.range(1);
  const Path& path = kPaths[state.range(2)];
  std::unique_ptr<Backend> be;
  try {
    std::vector<int> cores(bench_threads());
    for (int i = 0; i < bench_threads(); ++i) cores[i] = i;
    CpuBackendOptions o;
    o.split_bf16_activations = path.precision == 1;
    o.bf16_activations = path.precision == 2;
    o.linear_kernel = path.kernel;
    be = make_cpu_backend_for_isa(cpu_isa(), bench_threads(), cores, o);
  } catch (const std::exception& e) {
    return state.SkipWithError(e.what());
  }
  Weights w = make_weights(s, m <= 16 ? size_t(256) << 20 : 0, *be);
  std::vector<float> x(m * s.k, 0.01f), y(m * s.n);
  size_t i = 0;
  for (auto _ : state) {
    be->linear(x.data(), m, w.w[i], nullptr, y.data());
    i = (i + 1) % w.w.size();
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * m * s.n * s.k;
  state.SetLabel(std::string(s.name) + " " + path.label + " (" + be->name() + ")");
  state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pct_peak"] = benchmark::Counter(100.0 * flops / matrix_peak_flops(be->name()),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  if (m <= 16)
    state.counters["pct_bw"] = benchmark::Counter(100.0 * double(s.n) * s.k * 2 / bandwidth_bound(),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GemmPath)->ArgsProduct({{1, 2}, {1, 16, 512}, {0, 1, 2, 3, 4}})->Repetitions(3)
    ->ReportAggregatesOnly(true)->ComputeStatistics("max", max_of)->Unit(benchmark::kMillisecond)->UseRealTime();
// A speculative verify step's k + 1 = 1..6 rows (issue 30) on the bf16-dot paths (high, medium): a
// step reads W once whatever its rows, so the time should stay near the one-row time.
BENCHMARK(BM_GemmPath)->Name("BM_GemmPathVerifyRows")->ArgsProduct({{1, 2}, {1, 2, 3, 4, 5, 6}, {1, 2}})
    ->Repetitions(5)->ReportAggregatesOnly(true)->Unit(benchmark::kMillisecond)->UseRealTime();

// The AMX-INT8 core (u8 x · s8 W, exact s32; kernels/cpu/linear_amx_int8_impl.h) at m = 1, 16
// and 512, columns split over the benchmark threads: GOP/s and % of the measured TDPBUSD peak;
// at m <= 16 W (1 byte per weight) comes from memory, so % of the read bound is shown too.
void BM_AmxInt8Gemm(benchmark::State& state) {
  const LinearShape& s = kShapes[state.range(0)];
  const int64_t m = state.range(1);
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  if (!kt || !kt->linear_cols_amx_int8) return state.SkipWithError(("no AMX-INT8: " + amx_status()).c_str());
  const size_t wbytes = cpu::int8_panels_bytes(s.n, s.k);
  const size_t copies = m <= 16 ? std::max<size_t>(1, (size_t(256) << 20) / wbytes) : 1;
  std::vector<AlignedBuffer> w;
  std::vector<int8_t> plain(s.n * s.k);
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<int8_t>((i * 2654435761u) >> 24);
  for (size_t c = 0; c < copies; ++c) {
    w.emplace_back(wbytes);
    cpu::pack_int8_panels(plain.data(), s.n, s.k, reinterpret_cast<int8_t*>(w.back().data()));
  }
  std::vector<uint8_t> xs(m * s.k, 3);
  AlignedBuffer xq(cpu::amx_int8_rows_bytes(m, s.k));
  cpu::pack_amx_int8_rows(xs.data(), m, s.k, reinterpret_cast<uint8_t*>(xq.data()));
  cpu::AmxInt8Activations a{reinterpret_cast<const uint8_t*>(xq.data()), (m + 15) / 16 * 16, cpu::amx_int8_ldx(s.k)};
  std::vector<int32_t> y(m * s.n);
  std::vector<int> cores(bench_threads());
  for (int i = 0; i < bench_threads(); ++i) cores[i] = i;
  ThreadPool pool(bench_threads(), cores);
  const int64_t panels = (s.n + 15) / 16;
  size_t i = 0;
  for (auto _ : state) {
    cpu::LinearInt8Task t{m, s.k, reinterpret_cast<const int8_t*>(w[i].data()), s.n, y.data()};
    pool.parallel_for(panels, [&](int64_t b, int64_t e, int) {
      kt->linear_cols_amx_int8(a, t, 16 * b, std::min<int64_t>(s.n, 16 * e));
    });
    i = (i + 1) % w.size();
    benchmark::ClobberMemory();
  }
  const double ops = 2.0 * m * s.n * s.k;
  state.SetLabel(s.name);
  state.counters["GOP/s"] = benchmark::Counter(ops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pct_peak"] =
      benchmark::Counter(100.0 * ops / amx_int8_peak_ops(), benchmark::Counter::kIsIterationInvariantRate);
  if (m <= 16)
    state.counters["pct_bw"] = benchmark::Counter(100.0 * double(s.n) * s.k / bandwidth_bound(),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_AmxInt8Gemm)->ArgsProduct({{1, 2}, {1, 16, 512}})->Repetitions(3)->ReportAggregatesOnly(true)
    ->ComputeStatistics("max", max_of)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace pypto::bench
