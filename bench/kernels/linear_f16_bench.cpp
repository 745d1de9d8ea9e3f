// Linears on f16 weights: the embedding and lm_head that Qwen's AWQ and GPTQ-Int4 checkpoints keep
// in f16 (151,936 x 1,024 on Qwen3-0.6B, x 2,048 on Qwen3-30B-A3B). x stays f32 at every
// precision; the AVX-512 and AVX2 backends pack f16 weights as column panels
// (kernels/cpu/f16_panels.h, linear_f16_panels_impl.h); plain rows and the widening f32 kernel
// (linear_impl.h) were AVX2's before (bench/kernels/f16_panels_ab.sh times two builds).
// m = 1 (decode): GB/s of weight bytes and % of the read bound, W cycled through >= 256 MiB of
// copies; m = 4, 16 (a batched step's lm_head rows): multiply-adds per second and % of the
// f32-FMA peak measured in the same run.
//   bench_kernels --benchmark_filter='BM_LinearF16/1/16'
#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "bench_common.h"
#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"

namespace pypto::bench {
namespace {

struct F16Shape {
  const char* name;
  int64_t n, k;
};
const F16Shape kF16Shapes[] = {{"0.6b_lm_head_1024x151936", 151936, 1024}, {"30b_a3b_lm_head_2048x151936", 151936, 2048}};

// args: shape, m, precision (0 highest: f32 activations, 1 high: bf16x2, 2 medium: bf16).
void BM_LinearF16(benchmark::State& state) {
  const F16Shape& s = kF16Shapes[state.range(0)];
  const int64_t m = state.range(1);
  std::vector<int> cores(bench_threads());
  for (int i = 0; i < bench_threads(); ++i) cores[i] = i;
  CpuBackendOptions o;
  o.split_bf16_activations = state.range(2) == 1;
  o.bf16_activations = state.range(2) == 2;
  auto be = make_cpu_backend_for_isa(cpu_isa(), bench_threads(), cores, o);
  const size_t bytes = be->packed_weight_bytes(DType::F16, s.n, s.k);
  const size_t copies = m == 1 ? std::max<size_t>(2, ((size_t(256) << 20) + bytes - 1) / bytes) : 2;
  std::vector<uint16_t> plain(size_t(s.n * s.k));
  uint32_t r = 12345;
  for (auto& v : plain) {
    r = r * 1664525u + 1013904223u;
    v = f32_to_f16(float(int32_t(r >> 8) - (1 << 23)) / float(1 << 27));
  }
  std::vector<AlignedBuffer> slabs;
  std::vector<LinearWeight> ws;
  for (size_t c = 0; c < copies; ++c) {
    slabs.emplace_back(bytes);
    be->pack_weight(plain.data(), DType::F16, s.n, s.k, slabs.back().data());
    ws.push_back({slabs.back().data(), DType::F16, s.n, s.k});
  }
  std::vector<float> x(size_t(m * s.k)), y(size_t(m * s.n));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.001f * float(int(i % 2001) - 1000);
  size_t i = 0;
  for (auto _ : state) {
    be->linear(x.data(), m, ws[i], nullptr, y.data());
    i = (i + 1) % ws.size();
    benchmark::ClobberMemory();
  }
  const double macs = double(m) * s.n * s.k;
  state.SetLabel(std::string(s.name) + " f16 weights (" + be->name() + ")");
  state.counters["GMAC/s"] = benchmark::Counter(macs / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pct_fma_peak"] = benchmark::Counter(100.0 * 2 * macs / f32_peak_flops(),
                                                      benchmark::Counter::kIsIterationInvariantRate);
  if (m == 1)
    state.counters["pct_bw"] = benchmark::Counter(100.0 * double(bytes) / bandwidth_bound(),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_LinearF16)->ArgsProduct({{0, 1}, {1, 4, 16}, {0, 1, 2}})->UseRealTime()->MinTime(0.5);

}  // namespace
}  // namespace pypto::bench
