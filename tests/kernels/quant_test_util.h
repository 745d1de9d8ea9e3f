#pragma once
// Quantized weights for the kernel tests: a random QuantizedWeight of each format (kept alive with
// its arrays) and its staging into a backend's run-time layout.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/memory.h"
#include "kernels/backend.h"
#include "kernel_test_util.h"

namespace pypto::test {

// A random quantized weight of `format`, kept alive with its arrays.
struct RandomQuant {
  std::vector<int8_t> q8;
  std::vector<uint8_t> q4, e4m3, zero;
  std::vector<float> scale;
  QuantizedWeight w;
};

inline RandomQuant random_quant(WeightFormat f, int64_t n, int64_t k, int32_t group, uint32_t seed) {
  std::mt19937 rng(seed);
  RandomQuant r;
  r.w.format = f;
  r.w.n_out = n;
  r.w.k_in = k;
  r.w.group = f == WeightFormat::Int8 ? 0 : group;
  const int64_t G = r.w.groups();
  std::uniform_real_distribution<float> sd(0.001f, 0.02f);
  r.scale.resize(static_cast<size_t>(n * G));
  for (auto& s : r.scale) s = f == WeightFormat::Int4 ? f16_to_f32(f32_to_f16(sd(rng))) : sd(rng);
  switch (f) {
    case WeightFormat::Int8: {
      std::uniform_int_distribution<int> d(-127, 127);
      r.q8.resize(static_cast<size_t>(n * k));
      for (auto& v : r.q8) v = static_cast<int8_t>(d(rng));
      r.w.q8 = r.q8.data();
      break;
    }
    case WeightFormat::Int4: {
      std::uniform_int_distribution<int> d(0, 15);
      r.q4.resize(static_cast<size_t>(n * k));
      r.zero.resize(static_cast<size_t>(n * G));
      for (auto& v : r.q4) v = static_cast<uint8_t>(d(rng));
      for (auto& v : r.zero) v = static_cast<uint8_t>(d(rng));
      r.w.q4 = r.q4.data();
      r.w.zero = r.zero.data();
      break;
    }
    case WeightFormat::Fp8: {
      std::uniform_int_distribution<int> d(0, 255);
      r.e4m3.resize(static_cast<size_t>(n * k));
      for (auto& v : r.e4m3) {
        do v = static_cast<uint8_t>(d(rng));
        while ((v & 0x7F) == 0x7F);  // no NaN codes
      }
      r.w.e4m3 = r.e4m3.data();
      break;
    }
    case WeightFormat::Float: break;
  }
  r.w.scale = r.scale.data();
  return r;
}

struct Staged {
  AlignedBuffer buf;
  LinearWeight lw;
};
inline Staged stage(Backend& be, const QuantizedWeight& q) {
  Staged s{AlignedBuffer(be.packed_quantized_bytes(q.format, q.n_out, q.k_in, q.group)), {}};
  be.pack_quantized(q, s.buf.data());
  s.lw = LinearWeight{s.buf.data(), DType::BF16, q.n_out, q.k_in, q.format, q.group};
  return s;
}

// max|y − y_exact| / max|y| of the optimised backend at `high` against the reference with f32
// activations (exact x), m = 3, n = 256, k = 3072, x in [-2, 2] with the channels 5, 700, 1501
// and 2900 of every row multiplied by `outlier`: what high's 16-bit activations cost.
inline double high_error_vs_exact(WeightFormat f, int32_t group, float outlier) {
  const int64_t m = 3, n = 256, k = 3072;
  RandomQuant rq = random_quant(f, n, k, group, 17);
  auto ref = make_reference_backend(QuantActivations::F32);
  auto opt = make_cpu_backend(2, {}, MatmulPrecision::High);
  Staged sr = stage(*ref, rq.w), so = stage(*opt, rq.w);
  std::vector<float> x = random_f32(static_cast<size_t>(m * k), 11u, -2.0f, 2.0f);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c : {5, 700, 1501, 2900}) x[size_t(i * k + c)] *= outlier;
  std::vector<float> yr(static_cast<size_t>(m * n)), yo(yr.size());
  ref->linear(x.data(), m, sr.lw, nullptr, yr.data());
  opt->linear(x.data(), m, so.lw, nullptr, yo.data());
  double worst = 0, ymag = 0;
  for (size_t i = 0; i < yr.size(); ++i) {
    worst = std::max(worst, double(std::fabs(yo[i] - yr[i])));
    ymag = std::max(ymag, double(std::fabs(yr[i])));
  }
  return worst / ymag;
}

}  // namespace pypto::test
