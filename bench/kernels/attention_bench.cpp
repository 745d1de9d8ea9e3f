// The backend's paged attention at Qwen3-0.6B head shapes (16 query heads, 8 KV heads, head_dim
// 128, bf16 KV, block 16): one decode token at context 128 / 2048, and a 512-token prefill.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "bench_common.h"
#include "core/memory.h"
#include "kernels/backend.h"

namespace pypto::bench {
namespace {

// Best repetition: on a machine shared with other processes the fastest pass is the least disturbed.
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

void BM_Attention(benchmark::State& state) {
  const int32_t ctx = static_cast<int32_t>(state.range(0)), n_new = static_cast<int32_t>(state.range(1));
  const int32_t nh = 16, nkv = 8, hd = 128, bs = 16;
  std::vector<int> cores(bench_threads());
  std::iota(cores.begin(), cores.end(), 0);
  auto be = make_cpu_backend(bench_threads(), cores);
  const int32_t blocks = (ctx + bs - 1) / bs;
  AlignedBuffer k(size_t(blocks) * bs * nkv * hd * 2), v(k.size());
  for (size_t i = 0; i < k.size() / 2; ++i) {
    reinterpret_cast<uint16_t*>(k.data())[i] = 0x3c00 + (i % 97);
    reinterpret_cast<uint16_t*>(v.data())[i] = 0x3c00 + (i % 89);
  }
  KvCacheLayer cache{k.data(), v.data(), DType::BF16, blocks, bs, nkv, hd};
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  int32_t qs[2] = {0, n_new};
  AttentionBatch batch{1, qs, &ctx, table.data(), blocks};
  std::vector<float> q(size_t(n_new) * nh * hd, 0.01f), out(q.size());
  for (auto _ : state) {
    be->paged_attention(q.data(), n_new, nh, cache, batch, out.data());
    benchmark::ClobberMemory();
  }
  // Multiply-adds: each query sees (pos + 1) keys, 2 · head_dim per key per head.
  double macs = 0;
  for (int32_t t = 0; t < n_new; ++t) macs += double(ctx - n_new + t + 1) * nh * hd * 2;
  state.counters["GFLOP/s"] = benchmark::Counter(2 * macs / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(be->name());
}
BENCHMARK(BM_Attention)->Args({128, 1})->Args({2048, 1})->Args({512, 512})->Repetitions(5)
    ->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace pypto::bench
