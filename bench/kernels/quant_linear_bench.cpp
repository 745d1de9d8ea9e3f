// Quantized linears (WeightFormat int8, int4 in groups of 32/64/128, fp8 blocks) at Qwen3-0.6B
// shapes (the first four), Qwen3-14B shapes (the next four, one rank; the 27B hybrid's FFN is the
// same 5120 x 17408) and the Qwen3.6-27B hybrid's own (8: a GDN layer's in_proj, qkv 10240 + z
// 6144 rows; 9: its out_proj, 48 value heads x 128 -> 5120), then the lm_heads of Qwen3-0.6B (10, tied
// embedding) and Qwen3-30B-A3B (11), which --quantization quantizes like the layers:
//   m = 1 (decode): weight GB/s (the packed bytes with scales and zero points) and % of the read
//     bandwidth bound measured in the same run; several copies (>= 256 MiB) are cycled so every
//     call streams from DRAM.
//   m = 16 and 512 (batched decode, prefill): multiply-adds per second.
// Activations (the last argument): 0 f32 (highest: W dequantized in registers, FMA), 1 high, the
// default (bf16x2 with AVX512_BF16: x as hi + lo bf16, W converted exactly to bf16, VDPBF16PS;
// int16 on AVX2: x per 64-input block, W widened to s16, VPMADDWD), 2 int8 (medium: VNNI or
// VPMADDUBSW, AMX-INT8 for int8 weights from 16 rows). Run them side by side with a filter, e.g.
//   bench_kernels --benchmark_filter='BM_QuantLinear/[0-3]/[03]/1/' --benchmark_repetitions=5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
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

struct Shape {
  const char* name;
  int64_t n, k;
};
const Shape kQShapes[] = {{"qkv_1024x4096", 4096, 1024}, {"gate_up_1024x6144", 6144, 1024},
                          {"down_3072x1024", 1024, 3072}, {"o_2048x1024", 1024, 2048},
                          {"14b_qkv_5120x7168", 7168, 5120}, {"14b_gate_up_5120x34816", 34816, 5120},
                          {"14b_down_17408x5120", 5120, 17408}, {"14b_o_5120x5120", 5120, 5120},
                          {"27b_gdn_in_5120x16384", 16384, 5120}, {"27b_gdn_out_6144x5120", 5120, 6144},
                          {"0.6b_lm_head_1024x151936", 151936, 1024}, {"30b_a3b_lm_head_2048x151936", 151936, 2048}};
struct Format {
  const char* name;
  WeightFormat f;
  int32_t group;
};
const Format kFormats[] = {{"int8", WeightFormat::Int8, 0},
                           {"int4-g32", WeightFormat::Int4, 32},
                           {"int4-g64", WeightFormat::Int4, 64},
                           {"int4-g128", WeightFormat::Int4, 128},
                           {"fp8-b128", WeightFormat::Fp8, 128}};

std::unique_ptr<Backend> make_backend(QuantActivations act) {
  std::vector<int> cores(bench_threads());
  for (int i = 0; i < bench_threads(); ++i) cores[i] = i;
  CpuBackendOptions o;
  o.quant_activations = act;
  return make_cpu_backend_for_isa(cpu_isa(), bench_threads(), cores, o);
}

// args: shape, format, m, activations (0 f32, 1 bf16x2, 2 int8)
// The plain source pack_quantized reads for one [n, k] weight of format f: random codes (fp8:
// finite e4m3 codes), zero points, scales 0.01; q points into the vectors.
struct RandomQuantSource {
  std::vector<int8_t> q8;
  std::vector<uint8_t> q4, zero;
  std::vector<float> scale;
  QuantizedWeight q;
  RandomQuantSource(const Shape& s, const Format& f, std::mt19937& rng) {
    q.format = f.f;
    q.n_out = s.n;
    q.k_in = s.k;
    q.group = f.group;
    const int64_t G = q.groups();
    q8.resize(size_t(s.n * s.k));
    q4.resize(size_t(s.n * s.k));
    zero.resize(size_t(s.n * G));
    scale.assign(size_t(s.n * G), 0.01f);
    for (size_t i = 0; i < q8.size(); ++i) q8[i] = int8_t(rng() % 255 - 127), q4[i] = uint8_t(rng() % (f.f == WeightFormat::Fp8 ? 126 : 16));
    for (auto& z : zero) z = uint8_t(rng() % 16);
    q.q8 = q8.data();
    q.q4 = q4.data();
    q.e4m3 = q4.data();
    q.zero = zero.data();
    q.scale = scale.data();
  }
  RandomQuantSource(const RandomQuantSource&) = delete;
};

void BM_QuantLinear(benchmark::State& state) {
  const Shape& s = kQShapes[state.range(0)];
  const Format& f = kFormats[state.range(1)];
  const int64_t m = state.range(2);
  const QuantActivations act = state.range(3) == 0 ? QuantActivations::F32
                               : state.range(3) == 1 ? QuantActivations::Bf16Pair
                                                     : QuantActivations::Int8;
  if (f.f == WeightFormat::Fp8 && act != QuantActivations::F32) return state.SkipWithError("fp8 runs f32 activations only");
  auto be = make_backend(act);
  // High resolves to int16 activations where no bf16 dot product exists (AVX2).
  const bool high_int16 = act == QuantActivations::Bf16Pair && be->quant_activations() == QuantActivations::Int16;
  if (be->quant_activations() != act && !high_int16)
    return state.SkipWithError(str_cat(quant_activations_name(act), " activations have no kernel here").c_str());
  // Random plain source, packed once, then copied until the copies exceed 256 MiB (decode). The
  // packed copies are kept for the next benchmark of the same shape and format (the runs over
  // m = 1..8 and the activation kinds pack once: packing 256 MiB took longer than timing it; the
  // layout, kernels/cpu/quant_panels.h, does not depend on the activations).
  struct Staged {
    int64_t shape = -1, fmt = -1;
    bool many = false;
    size_t bytes = 0;
    AlignedBuffer slab;
    std::vector<LinearWeight> ws;
  };
  static Staged st;
  const bool many = m <= 16;
  std::mt19937 rng(1);
  if (st.shape != state.range(0) || st.fmt != state.range(1) || st.many != many) {
    st = Staged{};
    const RandomQuantSource src(s, f, rng);
    const QuantizedWeight& q = src.q;
    st.bytes = be->packed_quantized_bytes(f.f, s.n, s.k, f.group);
    const size_t copies = many ? std::max<size_t>(1, ((size_t(256) << 20) + st.bytes - 1) / st.bytes) : 1;
    // The copies lie back to back in one buffer (huge pages, as the staged slab of a model), each
    // starting on a 64-byte boundary: a separate small mapping per copy would run on 4 KiB pages.
    const size_t stride = (st.bytes + 63) / 64 * 64;
    st.slab = AlignedBuffer(stride * copies);
    for (size_t c = 0; c < copies; ++c) {
      be->pack_quantized(q, st.slab.data() + c * stride);
      st.ws.push_back(LinearWeight{st.slab.data() + c * stride, DType::BF16, s.n, s.k, f.f, f.group});
    }
    st.shape = state.range(0), st.fmt = state.range(1), st.many = many;
  }
  const size_t bytes = st.bytes;
  const std::vector<LinearWeight>& ws = st.ws;
  std::vector<float> x(size_t(m * s.k)), y(size_t(m * s.n));
  for (auto& v : x) v = float(int(rng() % 2001) - 1000) / 1000.0f;
  size_t i = 0;
  for (auto _ : state) {
    be->linear(x.data(), m, ws[i], nullptr, y.data());
    i = (i + 1) % ws.size();
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(s.name) + " " + f.name + " " + quant_activations_name(be->quant_activations()) + "-act" +
                 " (" + be->name() + ")");
  state.counters["GMAC/s"] = benchmark::Counter(double(m) * s.n * s.k / 1e9, benchmark::Counter::kIsIterationInvariantRate);
  // m <= 16: the weight-read bound is the time of reading the packed weight once, whatever m.
  if (m <= 16) {
    state.counters["GB/s"] = benchmark::Counter(double(bytes) / 1e9, benchmark::Counter::kIsIterationInvariantRate);
    state.counters["pct_bw"] = benchmark::Counter(100.0 * double(bytes) / bandwidth_bound(),
                                                  benchmark::Counter::kIsIterationInvariantRate);
  }
}

void QuantArgs(benchmark::internal::Benchmark* b) {
  for (int64_t shape = 0; shape < 12; ++shape)
    for (int64_t fmt = 0; fmt < 5; ++fmt)
      for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 16, 512})  // 2..8: a speculative verify step or a decode batch
        for (int64_t act : {2, 1, 0}) b->Args({shape, fmt, m, act});
}
BENCHMARK(BM_QuantLinear)->Apply(QuantArgs)->UseRealTime()->MinTime(0.2);

}  // namespace
}  // namespace pypto::bench

namespace pypto::bench {
namespace {

// Decode side by side on a loaded machine: the 16-bit-activation kernels of high (bf16x2, or
// int16 on AVX2) and the int8-activation kernels (medium, the old default) on the same staged
// copies, one call each in turn, every call timed; per kernel the best and the median call (a
// call that lost its core shows as a slow outlier, which the median and best ignore) as GB/s of
// weight bytes and % of the read bound measured in the same process, and new / old rate. args: shape, format, m, and 1 to keep one
// copy (cache-resident where it fits: the kernels' compute rate instead of DRAM's). Run it with
// PYPTO_BENCH_THREADS=1: with 2 threads the two backends' pools (2 threads each, spinning ~2 ms
// after each job) fight over the cores and the medians measure that, not the kernels.
void BM_QuantSideBySide(benchmark::State& state) {
  const Shape& s = kQShapes[state.range(0)];
  const Format& f = kFormats[state.range(1)];
  const int64_t m = state.range(2);
  if (f.f == WeightFormat::Fp8) return state.SkipWithError("fp8 runs f32 activations only");
  auto hi = make_backend(QuantActivations::Bf16Pair), med = make_backend(QuantActivations::Int8);
  const QuantActivations hi_act = hi->quant_activations();  // bf16x2, or int16 on AVX2
  if (hi_act == QuantActivations::F32 || med->quant_activations() != QuantActivations::Int8)
    return state.SkipWithError("high's 16-bit or medium's int8 activations have no kernel here");
  std::mt19937 rng(1);
  const RandomQuantSource src(s, f, rng);  // fp8 was skipped above
  const QuantizedWeight& q = src.q;
  // Both backends share the layout (quant_panels.h does not depend on the precision).
  const size_t bytes = hi->packed_quantized_bytes(f.f, s.n, s.k, f.group);
  const size_t copies = state.range(3) ? 1 : std::max<size_t>(2, ((size_t(256) << 20) + bytes - 1) / bytes);
  const size_t stride = (bytes + 63) / 64 * 64;
  AlignedBuffer slab(stride * copies);
  std::vector<LinearWeight> ws;
  for (size_t c = 0; c < copies; ++c) {
    hi->pack_quantized(q, slab.data() + c * stride);
    ws.push_back(LinearWeight{slab.data() + c * stride, DType::BF16, s.n, s.k, f.f, f.group});
  }
  std::vector<float> x(size_t(m * s.k)), y(size_t(m * s.n));
  for (auto& v : x) v = float(int(rng() % 2001) - 1000) / 1000.0f;
  std::vector<double> t_hi, t_med;
  size_t i = 0;
  auto timed = [&](Backend& be) {
    const auto t0 = std::chrono::steady_clock::now();
    be.linear(x.data(), m, ws[i], nullptr, y.data());
    i = (i + 1) % ws.size();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  for (auto _ : state) {
    t_hi.push_back(timed(*hi));
    t_med.push_back(timed(*med));
    benchmark::ClobberMemory();
  }
  auto stat = [](std::vector<double> v, bool median) {
    std::sort(v.begin(), v.end());
    return median ? v[v.size() / 2] : v.front();
  };
  const double bw = bandwidth_bound();
  for (bool median : {false, true}) {
    const double a = stat(t_hi, median), b = stat(t_med, median);
    const std::string tag = median ? "median" : "best";
    state.counters["high_pct_bw_" + tag] = 100.0 * double(bytes) / a / bw;
    state.counters["medium_pct_bw_" + tag] = 100.0 * double(bytes) / b / bw;
    state.counters["high_vs_medium_pct_" + tag] = 100.0 * b / a;
  }
  state.SetLabel(std::string(s.name) + " " + f.name + " m" + std::to_string(m) + ": high (" + quant_activations_name(hi_act) +
                 ") vs medium (int8), " +
                 std::to_string(int(bw / 1e9)) + " GB/s read bound");
}

void SideArgs(benchmark::internal::Benchmark* b) {
  for (int64_t shape = 0; shape < 8; ++shape)
    for (int64_t fmt : {0, 2, 3})
      for (int64_t m : {1, 4, 16}) b->Args({shape, fmt, m, 0});
  for (int64_t fmt : {0, 2, 3}) b->Args({3, fmt, 1, 1});
  for (int64_t shape : {10, 11})
    for (int64_t fmt : {0, 2})
      for (int64_t m : {1, 4, 16}) b->Args({shape, fmt, m, 0});
}
BENCHMARK(BM_QuantSideBySide)->Apply(SideArgs)->UseRealTime()->MinTime(1.0);

}  // namespace
}  // namespace pypto::bench
