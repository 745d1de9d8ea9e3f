// Linears on 16-bit weights with x in f32, where the weights are packed as column panels.
// BM_LinearF16: the f16 embedding and lm_head that Qwen's AWQ and GPTQ-Int4 checkpoints keep
// (151,936 x 1,024 on Qwen3-0.6B, x 2,048 on Qwen3-30B-A3B); the AVX-512 and AVX2 backends pack
// them as f16 column panels (kernels/cpu/f16_panels.h, linear_f16_panels_impl.h). BM_LinearBf16:
// Qwen3-0.6B's bf16 linears and the 30B-A3B lm_head; AVX2 packs them as pair panels for f32 FMA
// (linear_bf16_panels_f32_impl.h), AVX-512 BF16 for its bf16-dot kernels. Plain rows and the
// widening f32 kernel (linear_impl.h) were AVX2's before for both (bench/kernels/f16_panels_ab.sh
// times two builds; its fifth argument picks BM_LinearBf16).
// m = 1 (decode): GB/s of weight bytes and % of the read bound, W cycled through >= 256 MiB of
// copies; m = 4, 16 (a batched step's rows): multiply-adds per second and % of the f32-FMA peak
// measured in the same run.
//   bench_kernels --benchmark_filter='BM_LinearF16/1/16'
//   bench_kernels --benchmark_filter='BM_LinearBf16/[0-4]/1/0'
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

struct Shape16 {
  const char* name;
  int64_t n, k;
};
const Shape16 kF16Shapes[] = {{"0.6b_lm_head_1024x151936", 151936, 1024}, {"30b_a3b_lm_head_2048x151936", 151936, 2048}};
const Shape16 kBf16Shapes[] = {{"0.6b_qkv_1024x4096", 4096, 1024},
                               {"0.6b_gate_up_1024x6144", 6144, 1024},
                               {"0.6b_down_3072x1024", 1024, 3072},
                               {"0.6b_lm_head_1024x151936", 151936, 1024},
                               {"30b_a3b_lm_head_2048x151936", 151936, 2048}};

// args: shape, m, precision (0 highest: f32 activations, 1 high: bf16x2, 2 medium: bf16).
void linear_16bit(benchmark::State& state, DType dtype, const Shape16& s) {
  const int64_t m = state.range(1);
  std::vector<int> cores(bench_threads());
  for (int i = 0; i < bench_threads(); ++i) cores[i] = i;
  CpuBackendOptions o;
  o.split_bf16_activations = state.range(2) == 1;
  o.bf16_activations = state.range(2) == 2;
  auto be = make_cpu_backend_for_isa(cpu_isa(), bench_threads(), cores, o);
  const size_t bytes = be->packed_weight_bytes(dtype, s.n, s.k);
  const size_t copies = m == 1 ? std::max<size_t>(2, ((size_t(256) << 20) + bytes - 1) / bytes) : 2;
  std::vector<uint16_t> plain(size_t(s.n * s.k));
  uint32_t r = 12345;
  for (auto& v : plain) {
    r = r * 1664525u + 1013904223u;
    const float f = float(int32_t(r >> 8) - (1 << 23)) / float(1 << 27);
    v = dtype == DType::F16 ? f32_to_f16(f) : f32_to_bf16(f);
  }
  std::vector<AlignedBuffer> slabs;
  std::vector<LinearWeight> ws;
  for (size_t c = 0; c < copies; ++c) {
    slabs.emplace_back(bytes);
    be->pack_weight(plain.data(), dtype, s.n, s.k, slabs.back().data());
    ws.push_back({slabs.back().data(), dtype, s.n, s.k});
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
  state.SetLabel(std::string(s.name) + " " + dtype_name(dtype) + " weights (" + be->name() + ")");
  state.counters["GMAC/s"] = benchmark::Counter(macs / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pct_fma_peak"] = benchmark::Counter(100.0 * 2 * macs / f32_peak_flops(),
                                                      benchmark::Counter::kIsIterationInvariantRate);
  if (m == 1)
    state.counters["pct_bw"] = benchmark::Counter(100.0 * double(bytes) / bandwidth_bound(),
                                                  benchmark::Counter::kIsIterationInvariantRate);
}

void BM_LinearF16(benchmark::State& state) { linear_16bit(state, DType::F16, kF16Shapes[state.range(0)]); }
void BM_LinearBf16(benchmark::State& state) { linear_16bit(state, DType::BF16, kBf16Shapes[state.range(0)]); }
BENCHMARK(BM_LinearF16)->ArgsProduct({{0, 1}, {1, 4, 16}, {0, 1, 2}})->UseRealTime()->MinTime(0.5);
BENCHMARK(BM_LinearBf16)->ArgsProduct({{0, 1, 2, 3, 4}, {1, 4, 16}, {0, 1, 2}})->UseRealTime()->MinTime(0.5);

}  // namespace
}  // namespace pypto::bench
