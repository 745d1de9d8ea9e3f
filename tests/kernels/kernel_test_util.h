#pragma once
// Helpers for the kernel tests: deterministic random data, the optimised backends this machine
// can run (every ISA it has, at every matmul precision, at several thread counts), and tolerance
// checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "kernels/backend.h"
#include "kernels/cpu/cpu_backend.h"

namespace pypto::test {

// Unit roundoff of f32 (2^-24).
constexpr double kU32 = 5.9604644775390625e-08;

inline std::vector<float> random_f32(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// A weight of `dtype` holding (the rounding of) `values`, as raw bytes.
inline std::vector<uint8_t> encode(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> out(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    if (dtype == DType::F32) {
      std::memcpy(out.data() + 4 * i, &values[i], 4);
    } else {
      uint16_t h = dtype == DType::BF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

// Whether this CPU runs the kernels of `isa` (the features kernel_table.cpp requires for it).
inline bool cpu_supports(Isa isa) {
  const CpuFeatures& f = cpu_features();
  switch (isa) {
    case Isa::Scalar: return true;
    case Isa::Avx2: return f.avx2 && f.fma && f.f16c;
    case Isa::Avx512: return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_bf16;
  }
  return false;
}

inline CpuBackendOptions backend_options(MatmulPrecision p, CpuLinearKernel k = CpuLinearKernel::Auto) {
  CpuBackendOptions o;
  o.bf16_activations = p == MatmulPrecision::Medium;
  o.split_bf16_activations = p == MatmulPrecision::High;
  o.linear_kernel = k;
  return o;
}

struct BackendCase {
  std::string label;  // "avx512x2/high"
  Isa isa;
  int threads;
  MatmulPrecision precision = MatmulPrecision::Highest;
  std::string path;   // Backend::name(): which kernels run ("cpu-avx512-bf16x2act")
  CpuLinearKernel kernel = CpuLinearKernel::Auto;
};

// Every optimised ISA this CPU has, at every matmul precision and linear kernel (the per-CPU
// choice and each kernel this CPU can run: bf16 dot product, AMX tiles) that selects a different
// kernel path on it (duplicates, e.g. high on an ISA without a bf16 dot product, are left out),
// each with 1, 2 and 3 threads (3 > cores here on purpose: the split must not matter).
inline std::vector<BackendCase> optimised_cases() {
  std::vector<BackendCase> cases;
  for (Isa isa : {Isa::Avx2, Isa::Avx512}) {
    if (!cpu_supports(isa)) continue;
    std::vector<std::string> paths;
    for (MatmulPrecision p : {MatmulPrecision::Highest, MatmulPrecision::High, MatmulPrecision::Medium}) {
      std::vector<CpuLinearKernel> kernels = {CpuLinearKernel::Auto};
      if (p != MatmulPrecision::Highest && isa == Isa::Avx512) {
        kernels.push_back(CpuLinearKernel::Bf16Dot);
        if (amx_usable()) kernels.push_back(CpuLinearKernel::Amx);
      }
      for (CpuLinearKernel k : kernels) {
        const std::string path = make_cpu_backend_for_isa(isa, 1, {}, backend_options(p, k))->name();
        if (std::find(paths.begin(), paths.end(), path) != paths.end()) continue;
        paths.push_back(path);
        for (int t : {1, 2, 3})
          cases.push_back({std::string(isa_name(isa)) + "x" + std::to_string(t) + "/" + matmul_precision_name(p) + "/" +
                               cpu_linear_kernel_name(k),
                           isa, t, p, path, k});
      }
    }
  }
  return cases;
}

inline std::unique_ptr<Backend> make_case(const BackendCase& c) {
  return make_cpu_backend_for_isa(c.isa, c.threads, {}, backend_options(c.precision, c.kernel));
}

// A weight in `be`'s run-time layout (pack_weight), 64-byte aligned; .w describes it.
struct PackedWeight {
  std::vector<uint8_t> bytes;
  LinearWeight w;
  PackedWeight(const Backend& be, const std::vector<uint8_t>& plain, DType dtype, int64_t n, int64_t k)
      : bytes(be.packed_weight_bytes(dtype, n, k) + 64) {
    void* p = bytes.data() + (64 - reinterpret_cast<uintptr_t>(bytes.data()) % 64) % 64;
    be.pack_weight(plain.data(), dtype, n, k, p);
    w = LinearWeight{p, dtype, n, k};
  }
  PackedWeight(const PackedWeight&) = delete;
};

// The stated bound of one linear output of case `c` against the reference in double with the
// true f32 x, as a multiple of Σ_k |x_k w_k| (plus 2^-24 |bias|, added by the caller):
//  - f32 path (highest; any precision for f16/f32 weights or without a bf16 dot product): each
//    lane sums ceil(k / 8) products with FMA, then a tree of <= 4 adds: (ceil(k / 8) + 8) · 2^-24;
//  - high (bf16 weights, bf16-dot path): x ≈ hi + lo, two bf16 rounded to nearest, so
//    |x - hi - lo| <= 2^-16 |x|; one f32 lane sums the k products in pairs with up to 2
//    roundings per pair and per half: 2^-16 + (4k + 8) · 2^-24;
//  - medium: x rounded to one bf16, |x - bf16(x)| <= 2^-8 |x|: 2^-8 + (2k + 8) · 2^-24;
//  - bf16 weights in pair panels on AVX2 (any precision; linear_bf16_panels_f32_impl.h) and
//  - f16 weights in column panels (AVX-512, AVX2, any precision; f16_panels.h): x stays f32, one lane
//    per output sums the k exact products with FMA in increasing k, in blocks of 256 joined by
//    adds (<= k + 1 roundings): (k + 8) · 2^-24.
// f16 weights in panels (AVX-512): f32 x and FMA sums in k order, blocks of 256 (≤ k + 1 roundings),
// except at medium on the bf16-dot paths (linear_f16_panels_bf16dot_impl.h), where x and W are
// each rounded to bf16 (≤ 2^-9 relative each, so ≤ 2^-8 + 2^-18 per product) and the pairs summed
// by VDPBF16PS (≤ 2 roundings per pair).
inline bool f16_runs_bf16dot(const BackendCase& c) {
  return c.precision == MatmulPrecision::Medium && c.path.find("bf16act") != std::string::npos;
}
inline double f16_linear_bound(const BackendCase& c, int64_t k) {
  if (f16_runs_bf16dot(c)) return std::ldexp(1.0, -8) + std::ldexp(1.0, -18) + (double(k) + 8) * kU32;
  return (double(k) + 8) * kU32;
}

inline double linear_bound(const BackendCase& c, const Backend& be, DType dtype, int64_t k) {
  const double f32_path = (double((k + 7) / 8) + 8) * kU32;
  if (be.weight_layout_is_plain(dtype)) return f32_path;  // the bf16-dot paths pack their weights
  // AVX2's bf16 pair panels meet f32 x on FMA, one lane per output in k order, blocks of 256
  // (linear_bf16_panels_f32_impl.h): the f16 panels' bound.
  if (dtype == DType::BF16 && c.isa == Isa::Avx2) return (double(k) + 8) * kU32;
  if (dtype == DType::F16) return f16_linear_bound(c, k);
  if (c.precision == MatmulPrecision::High) return std::ldexp(1.0, -16) + (4.0 * double(k) + 8) * kU32;
  return std::ldexp(1.0, -8) + (2.0 * double(k) + 8) * kU32;
}

inline bool bitwise_equal(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace pypto::test
