// A MoE decode step's expert products from DRAM: per layer, 8 of the layer's 256 experts chosen
// at random, their gate_up [1024, 2048] and down [2048, 512] (the Qwen3.6-35B-A3B shape) as int4
// g128 (the GPTQ-Int4 checkpoints) run as two grouped linears at m = 1, as model/moe_block.h does.
// The experts of many layers are staged so that together they far exceed the caches, and the
// page tables that map them too: what a full-depth model reads.
//
// args: total MiB of staged experts; layout 0 = one mapping per expert tensor (4 KiB pages: how
// the hybrids staged small tensors before), 1 = back to back in huge-page slabs (how they are
// staged now); activations 1 = high (bf16x2, or int16 on AVX2), 2 = int8 (medium). Counters: GB/s
// of expert bytes read and pct_bw of the read bound (BM_ReadBandwidth's 1 GiB stream) measured in
// the same process.
//   bench_kernels --benchmark_filter='BM_MoeExpertsDecode' --benchmark_repetitions=3
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "bench_common.h"
#include "core/cpu_features.h"
#include "core/error.h"
#include "core/memory.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"

namespace pypto::bench {
namespace {

constexpr int64_t kHidden = 2048, kInter = 512, kTopK = 8, kExpertsPerLayer = 256, kGroup = 128;

struct ExpertPool {
  int64_t mib = -1, layout = -1;
  size_t expert_bytes = 0;  // gate_up + down, packed
  std::vector<AlignedBuffer> maps;
  std::vector<LinearWeight> gate_up, down;  // [expert] over every layer
};

// Random int4 codes and scales for one [n, k] weight, packed by the backend into dst.
void pack_random(Backend& be, int64_t n, int64_t k, std::mt19937& rng, uint8_t* dst) {
  std::vector<uint8_t> q4(size_t(n * k)), zero(size_t(n * (k / kGroup)), 8);  // one value 0..15 per byte
  std::vector<float> scale(size_t(n * (k / kGroup)), 0.01f);
  for (auto& v : q4) v = uint8_t(rng() & 15);
  QuantizedWeight q;
  q.format = WeightFormat::Int4;
  q.n_out = n;
  q.k_in = k;
  q.group = kGroup;
  q.q4 = q4.data();
  q.zero = zero.data();
  q.scale = scale.data();
  be.pack_quantized(q, dst);
}

void BM_MoeExpertsDecode(benchmark::State& state) {
  const int64_t mib = state.range(0), layout = state.range(1);
  CpuBackendOptions o;
  o.quant_activations = state.range(2) == 1 ? QuantActivations::Bf16Pair : QuantActivations::Int8;
  std::vector<int> cores(static_cast<size_t>(bench_threads()));
  for (int i = 0; i < bench_threads(); ++i) cores[size_t(i)] = i;
  auto be = make_cpu_backend_for_isa(cpu_isa(), bench_threads(), cores, o);
  // High resolves to int16 activations where no bf16 dot product exists (AVX2).
  const bool high_int16 = o.quant_activations == QuantActivations::Bf16Pair && be->quant_activations() == QuantActivations::Int16;
  if (be->quant_activations() != o.quant_activations && !high_int16)
    return state.SkipWithError("these activations have no kernel here");
  const size_t gu_bytes = be->packed_quantized_bytes(WeightFormat::Int4, 2 * kInter, kHidden, kGroup);
  const size_t dn_bytes = be->packed_quantized_bytes(WeightFormat::Int4, kHidden, kInter, kGroup);
  static ExpertPool pool;
  if (pool.mib != mib || pool.layout != layout) {
    pool = ExpertPool{};
    pool.mib = mib, pool.layout = layout;
    const size_t per_expert = (gu_bytes + 63) / 64 * 64 + (dn_bytes + 63) / 64 * 64;
    const int64_t experts = std::max<int64_t>(kExpertsPerLayer, int64_t((size_t(mib) << 20) / per_expert));
    std::mt19937 rng(3);
    // One expert's packed weights, copied to every slot (packing each would take minutes; the
    // kernels' speed does not depend on the codes).
    AlignedBuffer gu0(gu_bytes), dn0(dn_bytes);
    pack_random(*be, 2 * kInter, kHidden, rng, gu0.data());
    pack_random(*be, kHidden, kInter, rng, dn0.data());
    constexpr size_t kArena = size_t(64) << 20;
    size_t used = kArena;
    uint8_t* arena = nullptr;
    auto take = [&](size_t n) -> uint8_t* {
      if (layout == 0) return pool.maps.emplace_back(n).data();
      n = (n + 63) / 64 * 64;
      if (used + n > kArena) arena = pool.maps.emplace_back(kArena).data(), used = 0;
      uint8_t* p = arena + used;
      used += n;
      return p;
    };
    for (int64_t e = 0; e < experts; ++e) {
      uint8_t* g = take(gu_bytes);
      std::memcpy(g, gu0.data(), gu_bytes);
      uint8_t* d = take(dn_bytes);
      std::memcpy(d, dn0.data(), dn_bytes);
      pool.gate_up.push_back(LinearWeight{g, DType::BF16, 2 * kInter, kHidden, WeightFormat::Int4, int32_t(kGroup)});
      pool.down.push_back(LinearWeight{d, DType::BF16, kHidden, kInter, WeightFormat::Int4, int32_t(kGroup)});
    }
    pool.expert_bytes = gu_bytes + dn_bytes;
  }
  const int64_t n_experts = int64_t(pool.gate_up.size());
  std::vector<float> x(size_t(kTopK * kHidden), 0.5f), gu(size_t(kTopK * 2 * kInter)), act(size_t(kTopK * kInter), 0.25f),
      y(size_t(kTopK * kHidden));
  std::mt19937 rng(5);
  std::vector<Backend::LinearCall> calls(static_cast<size_t>(kTopK));
  for (auto _ : state) {
    // One layer: 8 distinct experts anywhere in the pool (a layer's 256 of them, in some layer).
    const int64_t layer0 = int64_t(rng() % uint32_t(n_experts / kExpertsPerLayer)) * kExpertsPerLayer;
    int64_t chosen[kTopK];
    for (int64_t j = 0; j < kTopK; ++j) {
      bool dup;
      do {
        chosen[j] = layer0 + int64_t(rng() % kExpertsPerLayer);
        dup = false;
        for (int64_t i = 0; i < j; ++i) dup = dup || chosen[i] == chosen[j];
      } while (dup);
    }
    for (int64_t j = 0; j < kTopK; ++j)
      calls[size_t(j)] = {x.data() + j * kHidden, 1, &pool.gate_up[size_t(chosen[j])], gu.data() + j * 2 * kInter};
    be->linear_grouped(calls.data(), kTopK);
    for (int64_t j = 0; j < kTopK; ++j)
      calls[size_t(j)] = {act.data() + j * kInter, 1, &pool.down[size_t(chosen[j])], y.data() + j * kHidden};
    be->linear_grouped(calls.data(), kTopK);
    benchmark::ClobberMemory();
  }
  const double bytes = double(kTopK) * double(pool.expert_bytes);
  state.SetLabel(str_cat(n_experts, " experts, ", layout == 0 ? "a mapping each (4 KiB pages)" : "huge-page slabs", ", ",
                         quant_activations_name(be->quant_activations()), " (", be->name(), ")"));
  state.counters["GB/s"] = benchmark::Counter(bytes / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["pct_bw"] = benchmark::Counter(100.0 * bytes / bandwidth_bound(), benchmark::Counter::kIsIterationInvariantRate);
}

// 512 MiB: page tables of 1 MiB (cached); 4 GiB: 8 MiB; 12 GiB: 24 MiB (near this host's 32 MiB
// L3, as the full 35B-A3B's 20 GB of weights: 40 MiB).
BENCHMARK(BM_MoeExpertsDecode)
    ->Args({512, 0, 1})->Args({512, 1, 1})->Args({4096, 0, 1})->Args({4096, 1, 1})
    ->Args({12288, 0, 1})->Args({12288, 1, 1})->Args({4096, 0, 2})->Args({4096, 1, 2})
    ->UseRealTime()->MinTime(0.5);

}  // namespace
}  // namespace pypto::bench
