#pragma once
// Helpers for the kernel tests: deterministic random data, the optimised backends this machine
// can run (every ISA it has, at several thread counts), and tolerance checks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
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

struct BackendCase {
  std::string label;  // "avx512x2"
  Isa isa;
  int threads;
};

// Every optimised ISA this CPU has, each with 1, 2 and 3 threads (3 > cores here on purpose: the
// split must not matter).
inline std::vector<BackendCase> optimised_cases() {
  std::vector<BackendCase> cases;
  const CpuFeatures& f = cpu_features();
  std::vector<Isa> isas;
  if (f.avx2 && f.fma && f.f16c) isas.push_back(Isa::Avx2);
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512_bf16) isas.push_back(Isa::Avx512);
  for (Isa isa : isas)
    for (int t : {1, 2, 3}) cases.push_back({std::string(isa_name(isa)) + "x" + std::to_string(t), isa, t});
  return cases;
}

inline std::unique_ptr<Backend> make_case(const BackendCase& c) { return make_cpu_backend_for_isa(c.isa, c.threads); }

inline bool bitwise_equal(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

}  // namespace pypto::test
