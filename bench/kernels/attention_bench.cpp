// The backend's paged attention at Qwen3-0.6B head shapes (16 query heads, 8 KV heads, head_dim
// 128, bf16 KV, block 16): one decode token at context 128 / 2048, and a 512-token prefill; and a
// continuous-batching decode step (BM_AttentionDecodeBatch): many sequences, one query each.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench_common.h"
#include "core/kv_dtype.h"
#include "core/memory.h"
#include "kernels/backend.h"

namespace pypto::bench {
namespace {

// Best repetition: on a machine shared with other processes the fastest pass is the least disturbed.
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

// A KV cache of `blocks` blocks filled with fixed finite values: bf16, or 8-bit (int8 / fp8 e4m3
// codes with one f32 scale per row, kernels/kv_quant.h).
struct BenchKv {
  AlignedBuffer k, v, ks, vs;
  KvCacheLayer layer;
  BenchKv(int32_t blocks, int32_t bs, int32_t nkv, int32_t hd, DType dt = DType::BF16)
      : k(size_t(blocks) * bs * nkv * hd * dtype_size(dt)), v(k.size()),
        ks(dt == DType::BF16 ? 64 : size_t(blocks) * bs * nkv * 4), vs(ks.size()) {
    if (dt == DType::BF16) {
      for (size_t i = 0; i < k.size() / 2; ++i) {
        reinterpret_cast<uint16_t*>(k.data())[i] = 0x3c00 + (i % 97);
        reinterpret_cast<uint16_t*>(v.data())[i] = 0x3c00 + (i % 89);
      }
      layer = {k.data(), v.data(), DType::BF16, blocks, bs, nkv, hd};
      return;
    }
    for (size_t i = 0; i < k.size(); ++i) {  // finite codes of either format
      k.data()[i] = uint8_t(i % 97);
      v.data()[i] = uint8_t(i % 89);
    }
    for (size_t i = 0; i < ks.size() / 4; ++i) {
      reinterpret_cast<float*>(ks.data())[i] = 0.01f;
      reinterpret_cast<float*>(vs.data())[i] = 0.02f;
    }
    layer = {k.data(), v.data(), dt, blocks, bs, nkv, hd, reinterpret_cast<float*>(ks.data()),
             reinterpret_cast<float*>(vs.data())};
  }
};

// Benchmark argument -> KV dtype: 0 bf16, 1 int8, 2 fp8 e4m3.
DType kv_dtype_arg(int64_t a) { return a == 1 ? DType::I8 : a == 2 ? DType::F8_E4M3 : DType::BF16; }

void BM_Attention(benchmark::State& state) {
  const int32_t ctx = static_cast<int32_t>(state.range(0)), n_new = static_cast<int32_t>(state.range(1));
  const bool hybrid_heads = state.range(2) == 1;  // as BM_AttentionDecodeBatch's fifth argument
  const int32_t nh = 16, nkv = hybrid_heads ? 2 : 8, hd = hybrid_heads ? 256 : 128, bs = 16;
  std::vector<int> cores(bench_threads());
  std::iota(cores.begin(), cores.end(), 0);
  auto be = make_cpu_backend(bench_threads(), cores);
  const int32_t blocks = (ctx + bs - 1) / bs;
  BenchKv kv(blocks, bs, nkv, hd);
  const KvCacheLayer& cache = kv.layer;
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
// Third argument: the head shape (0 = 16 query / 8 KV heads of 128, 1 = the hybrids' 16 / 2 of 256).
// The cache is one unshuffled pool read again every iteration (2,048 tokens of 0.6B heads: 8 MiB
// of bf16 K and V; 8,192 of the hybrids' heads: 16 MiB), so it comes from the L3: the kernel's
// arithmetic with DRAM out of the way (compare BM_AttentionDecodeBatch). 8,192 keys are 4
// segments: on 2 or more threads the decode is split along the sequence (attention_decode_heads).
BENCHMARK(BM_Attention)->Args({128, 1, 0})->Args({2048, 1, 0})->Args({512, 512, 0})->Args({8192, 1, 1})
    ->Repetitions(5)->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond)->UseRealTime()->MeasureProcessCPUTime();
// A speculative verify step's attention (issue 30): one sequence's last token and k drafts, n = k + 1
// = 1..5 query rows at context 512, the 0.6B heads; each row's time against the one-row step.
BENCHMARK(BM_Attention)->Name("BM_AttentionVerifyRows")->ArgsProduct({{512}, {1, 2, 3, 4, 5}, {0}})
    ->Repetitions(5)->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond)->UseRealTime()->MeasureProcessCPUTime();

// One decode step of `seqs` sequences (one new token each) at context `ctx`, the KV cache coming
// from DRAM: kPools batches of sequences live in one pool and the iterations cycle through them,
// so the cache read (kPools × 32 MiB at context 512, at least 192 MiB) far exceeds the L3. {128,
// 1, 1}: the single-sequence decode token of bench_model's "decode @ context 128" (one layer). Third argument 1:
// the blocks shuffled, as in a long-running paged cache; 0: each sequence's blocks consecutive
// (as right after prefill), a stride the hardware prefetchers follow. GB/s counts the K and V
// bytes read (8-bit caches: codes and row scales). Fourth argument: the KV dtype (kv_dtype_arg).
// Fifth (optional): the head shape, 0 = Qwen3-0.6B / 14B-like (16 query / 8 KV heads of 128), 1 =
// the Qwen3.5 / 3.6 MoE hybrids' gated attention (16 query / 2 KV heads of 256: GQA groups of 8),
// 2 = Qwen3-30B-A3B's (32 query / 4 KV heads of 128: also groups of 8, half the bytes per key).
void BM_AttentionDecodeBatch(benchmark::State& state) {
  const int32_t ctx = static_cast<int32_t>(state.range(0)), seqs = static_cast<int32_t>(state.range(1));
  const int64_t shape = state.range(4);  // 0: 0.6B heads, 1: the hybrids', 2: Qwen3-30B-A3B's
  const int32_t nh = shape == 2 ? 32 : 16, nkv = shape == 1 ? 2 : (shape == 2 ? 4 : 8), hd = shape == 1 ? 256 : 128;
  const int32_t bs = 16;
  const DType dt = kv_dtype_arg(state.range(3));
  const double row_bytes = double(kv_row_bytes(dt, hd));
  // Enough batches of sequences that their caches together far exceed the L3 (>= 192 MiB).
  const int64_t pool_bytes = int64_t(seqs) * ctx * nkv * int64_t(row_bytes) * 2;
  const int kPools = int(std::max<int64_t>(6, ((int64_t(192) << 20) + pool_bytes - 1) / pool_bytes));
  std::vector<int> cores(bench_threads());
  std::iota(cores.begin(), cores.end(), 0);
  auto be = make_cpu_backend(bench_threads(), cores);
  const int32_t per_seq = (ctx + bs - 1) / bs, blocks = per_seq * seqs * kPools;
  BenchKv kv(blocks, bs, nkv, hd, dt);
  const KvCacheLayer& cache = kv.layer;
  std::vector<int32_t> ids(blocks);
  std::iota(ids.begin(), ids.end(), 0);
  if (state.range(2)) std::shuffle(ids.begin(), ids.end(), std::mt19937(7));
  std::vector<int32_t> qs(seqs + 1), lens(seqs, ctx);
  std::iota(qs.begin(), qs.end(), 0);
  std::vector<float> q(size_t(seqs) * nh * hd), out(q.size());
  for (size_t i = 0; i < q.size(); ++i) q[i] = 0.01f * float(i % 13);
  int pool = 0;
  for (auto _ : state) {
    AttentionBatch batch{seqs, qs.data(), lens.data(), ids.data() + size_t(pool) * per_seq * seqs, per_seq};
    be->paged_attention(q.data(), seqs, nh, cache, batch, out.data());
    benchmark::ClobberMemory();
    pool = (pool + 1) % kPools;
  }
  const double macs = double(seqs) * ctx * nh * hd * 2, bytes = double(seqs) * ctx * nkv * row_bytes * 2;
  state.counters["GFLOP/s"] = benchmark::Counter(2 * macs / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(be->name()) + " kv " + kv_cache_dtype_name(dt));
}
BENCHMARK(BM_AttentionDecodeBatch)->Args({512, 16, 1, 0, 0})->Args({300, 16, 1, 0, 0})->Args({512, 16, 0, 0, 0})
    ->Args({128, 1, 1, 0, 0})
    // The 8-bit caches beside bf16: one sequence at 2,560 tokens (bench/model/kv8_long_context.sh's
    // context) and 16 sequences at 512.
    ->Args({2560, 1, 1, 0, 0})->Args({2560, 1, 1, 1, 0})->Args({2560, 1, 1, 2, 0})
    ->Args({512, 16, 1, 1, 0})->Args({512, 16, 1, 2, 0})
    // One sequence of 32K tokens (issue 31's long-context decode), bf16, int8 and fp8, the hybrids'
    // attention heads and the 0.6B heads.
    ->Args({32768, 1, 1, 0, 1})->Args({32768, 1, 1, 1, 1})->Args({32768, 1, 1, 2, 1})
    ->Args({32768, 1, 1, 0, 0})->Args({32768, 1, 1, 1, 0})->Args({32768, 1, 1, 2, 0})
    // Qwen3-30B-A3B's heads at 32K (issue 36), bf16 and int8; a batch of 8 at 4K of them and of
    // the hybrids' heads (GQA groups of 8 unsplit: one task per KV head or per two).
    ->Args({32768, 1, 1, 0, 2})->Args({32768, 1, 1, 1, 2})->Args({4096, 8, 1, 0, 2})->Args({4096, 8, 1, 0, 1})
    // The same with each sequence's blocks in order (as right after its prefill), and at 4K: one
    // sequence and a batch of 8, bf16 and int8 (0.6B heads).
    ->Args({32768, 1, 0, 0, 0})->Args({32768, 1, 0, 1, 0})
    ->Args({4096, 1, 1, 0, 0})->Args({4096, 1, 1, 1, 0})->Args({4096, 8, 1, 0, 0})->Args({4096, 8, 1, 1, 0})
    // CPU time: all threads' (a loaded host's processes take turns on the cores; CPU time / threads
    // is the step's time on cores of its own, what the wall time is on a quiet host).
    ->Repetitions(5)->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond)->UseRealTime()->MeasureProcessCPUTime();

// Issue 31's long prefill: the last 512 rows of an 8,192-token prompt, 0.6B heads (~7,900 keys per
// query, 32 MiB of bf16 K / V): the column path's arithmetic with the cache mostly in L3.
BENCHMARK(BM_Attention)->Name("BM_AttentionLongPrefill")->Args({8192, 512, 0})
    ->Repetitions(5)->ReportAggregatesOnly(true)->Unit(benchmark::kMicrosecond)->UseRealTime()->MeasureProcessCPUTime();

}  // namespace
}  // namespace pypto::bench
