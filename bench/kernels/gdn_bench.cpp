// The gated delta rule (Backend::gated_delta_rule) at the published Qwen3.5 / Qwen3.6 head shapes,
// d_k = d_v = 128: one decode token of one layer (Qwen3.6-27B: 48 value heads over 16 key heads;
// 35B-A3B: 32 over 16), on the CPU backend (AVX-512 or AVX2 along d_v, whichever the CPU has)
// and the scalar definition. The state (n_v · 64 KiB f32) is read and written once per token: GB/s counts those
// bytes, the measure a decode step is bound by. Arguments: n_v, n_k, tokens per call, scalar (1).
// With 64 tokens per call (a recurrent prefill) a head's state stays in L2 across its tokens:
// the kernel's arithmetic, not the state's stream, sets the pace.
// BM_GatedDeltaRulePrefill: a 512- or 4096-token prefill of one layer, heads over the backend's
// threads, the recurrence (form 0, the backend's kernel) against the chunked WY form
// (kernels/gdn_chunked.h): f32 FMA products (form 1, AVX-512 or AVX2), AVX-512 BF16 dot products with
// hi + lo operands (form 2, parts 3) and with bf16 operands (form 3, parts 1). Arguments: n_v,
// n_k, tokens, form. Shapes: Qwen3.5-0.8B 16 value / 16 key heads, Qwen3.6-35B-A3B 32 / 16.
// GFLOP/s counts the chunked form's matrix products, 11 C²·d multiply-adds per head and 64-token
// chunk at d_k = d_v = d (K Kᵀ, Q Kᵀ, T·βV, T·K, W S, Q S, masked QKᵀ·V', Kᵀ V'), for every
// form alike; pct_peak is that rate against the peak of the form's instruction measured in the
// same run (f32 FMA for form 1, VDPBF16PS divided by the parts for forms 2 and 3); GFLOP/s_cpu
// and pct_peak_cpu count per CPU-second of the process instead of wall time (the shared-host
// figure; run with PYPTO_BENCH_THREADS=1 for an exact one).
#include <benchmark/benchmark.h>

#include <time.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "bench_common.h"
#include "core/cpu_features.h"
#include "kernels/backend.h"
#include "kernels/gdn_chunked.h"

namespace pypto::bench {
namespace {

void BM_GatedDeltaRule(benchmark::State& state) {
  const int32_t n_v = int32_t(state.range(0)), n_k = int32_t(state.range(1)), dk = 128, dv = 128;
  const int64_t n = state.range(2);
  const bool scalar = state.range(3) != 0;
  std::vector<int> cores(bench_threads());
  std::iota(cores.begin(), cores.end(), 0);
  auto be = scalar ? make_reference_backend() : make_cpu_backend(bench_threads(), cores);
  std::vector<float> qk(size_t(n) * 2 * n_k * dk, 0.01f), v(size_t(n) * n_v * dv, 0.5f);
  std::vector<float> g(size_t(n) * n_v, -0.1f), beta(size_t(n) * n_v, 0.5f);
  std::vector<float> S(size_t(n_v) * dk * dv, 0.0f), out(size_t(n) * n_v * dv);
  GdnSequence s;
  s.q = qk.data();
  s.k = qk.data() + int64_t(n_k) * dk;
  s.qk_stride = 2 * int64_t(n_k) * dk;
  s.v = v.data();
  s.v_stride = int64_t(n_v) * dv;
  s.g = g.data();
  s.beta = beta.data();
  s.n = n;
  s.n_k = n_k;
  s.n_v = n_v;
  s.d_k = dk;
  s.d_v = dv;
  s.state = S.data();
  s.out = out.data();
  for (auto _ : state) {
    be->gated_delta_rule(s);
    benchmark::ClobberMemory();
  }
  const double state_bytes = double(S.size()) * sizeof(float) * 2 * double(n);  // read + write per token
  state.counters["GB/s"] = benchmark::Counter(state_bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["us/token"] =
      benchmark::Counter(double(n) * 1e-6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  state.SetLabel(be->name());
}
BENCHMARK(BM_GatedDeltaRule)
    ->Args({48, 16, 1, 0})->Args({32, 16, 1, 0})->Args({48, 16, 64, 0})->Args({48, 16, 1, 1})->Args({32, 16, 1, 1})
    ->Args({32, 16, 64, 0})->Args({32, 16, 64, 1})
    ->Repetitions(3)->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond)->UseRealTime();

void BM_GatedDeltaRulePrefill(benchmark::State& state) {
  const int32_t n_v = int32_t(state.range(0)), n_k = int32_t(state.range(1)), dk = 128, dv = 128;
  const int64_t n = state.range(2);
  const int64_t form = state.range(3);
  const bool chunked = form != 0;
  if (chunked && cpu_isa() != Isa::Avx512 && cpu_isa() != Isa::Avx2) {
    state.SkipWithError("the chunked kernel needs AVX2 or AVX-512");
    return;
  }
  if (form >= 2 && bf16_peak_flops() <= 0) {
    state.SkipWithError("the bf16 chunked kernel needs AVX512_BF16");
    return;
  }
  const int32_t parts = form == 2 ? 3 : 1;
  std::vector<int> cores(bench_threads());
  std::iota(cores.begin(), cores.end(), 0);
  auto be = make_cpu_backend(bench_threads(), cores);
  // Unit-norm q, k rows (as the model feeds them), mild decay.
  std::vector<float> qk(size_t(n) * 2 * n_k * dk, 1.0f / std::sqrt(float(dk))), v(size_t(n) * n_v * dv, 0.5f);
  std::vector<float> g(size_t(n) * n_v, -0.1f), beta(size_t(n) * n_v, 0.5f);
  std::vector<float> S(size_t(n_v) * dk * dv, 0.0f), out(size_t(n) * n_v * dv);
  GdnSequence s;
  s.q = qk.data();
  s.k = qk.data() + int64_t(n_k) * dk;
  s.qk_stride = 2 * int64_t(n_k) * dk;
  s.v = v.data();
  s.v_stride = int64_t(n_v) * dv;
  s.g = g.data();
  s.beta = beta.data();
  s.n = n;
  s.n_k = n_k;
  s.n_v = n_v;
  s.d_k = dk;
  s.d_v = dv;
  s.state = S.data();
  s.out = out.data();
  timespec c0, c1;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
  for (auto _ : state) {
    if (form == 1 && cpu_isa() == Isa::Avx512)
      be->parallel_rows(n_v, [&](int64_t h) { cpu::gdn_head_chunked_avx512(s, int32_t(h)); });
    else if (form == 1)
      be->parallel_rows(n_v, [&](int64_t h) { cpu::gdn_head_chunked_avx2(s, int32_t(h)); });
    else if (chunked)
      be->parallel_rows(n_v, [&](int64_t h) { cpu::gdn_head_chunked_bf16_avx512(s, int32_t(h), parts); });
    else be->gated_delta_rule(s);
    benchmark::ClobberMemory();
  }
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
  const double cpu_s = double(c1.tv_sec - c0.tv_sec) + 1e-9 * double(c1.tv_nsec - c0.tv_nsec);
  state.counters["us/token"] =
      benchmark::Counter(double(n) * 1e-6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  if (chunked) {
    const double C = cpu::kGdnChunk, flops = 2.0 * 11 * C * C * dk * double(n / cpu::kGdnChunk) * n_v;
    const double peak = form == 1 ? f32_peak_flops() : bf16_peak_flops() / parts;
    state.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    if (peak > 0) {
      state.counters["pct_peak"] =
          benchmark::Counter(100.0 * flops / peak, benchmark::Counter::kIsIterationInvariantRate);
      // The same share per CPU-second of the process (the peak's per-CPU figure, bench_common.h):
      // what the cores do while they are ours on a shared host. Exact with PYPTO_BENCH_THREADS=1;
      // with more threads, time the pool's workers spend waiting counts as work.
      const double work = flops * double(state.iterations());
      state.counters["GFLOP/s_cpu"] = work / cpu_s / 1e9;
      state.counters["pct_peak_cpu"] = 100.0 * work / cpu_s / (peak / bench_threads());
    }
  }
  static const char* const kLabels[] = {"recurrence", "chunked f32", "chunked bf16x3", "chunked bf16"};
  state.SetLabel(kLabels[form]);
}
BENCHMARK(BM_GatedDeltaRulePrefill)
    ->ArgsProduct({{16}, {16}, {512, 4096}, {0, 1, 2, 3}})
    ->ArgsProduct({{32}, {16}, {512, 4096}, {0, 1, 2, 3}})
    ->Repetitions(3)->ReportAggregatesOnly(true)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace pypto::bench
