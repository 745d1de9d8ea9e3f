// simd.h's AVX-512 helpers whose exact bits the kernels' batch invariance rests on: hsum8() must
// equal hsum() bit for bit (the GEMM tiles store with hsum8, the attention and tails with hsum).
// This file is compiled with the AVX-512 flags and skips on CPUs without them.
#define PYPTO_ISA_NS avx512
#include "kernels/cpu/simd.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/cpu_features.h"

namespace pypto::cpu::avx512 {
namespace {

TEST(Simd, Hsum8EqualsHsumBitwise) {
  if (cpu_isa() != Isa::Avx512) GTEST_SKIP() << "CPU without AVX-512";
  std::mt19937 rng(7);
  // Mixed magnitudes and signs so different addition orders would round differently.
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> expo(-20, 20);
  int differing_orders = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    alignas(64) float lanes[8][16];
    vf v[8];
    for (int j = 0; j < 8; ++j) {
      for (int l = 0; l < 16; ++l) lanes[j][l] = std::ldexp(mant(rng), expo(rng));
      v[j] = vload(lanes[j]);
    }
    float out[8];
    hsum8(v, out);
    for (int j = 0; j < 8; ++j) {
      const float want = hsum(v[j]);
      ASSERT_EQ(std::memcmp(&out[j], &want, sizeof(float)), 0)
          << "trial " << trial << " vector " << j << ": hsum8 " << out[j] << " vs hsum " << want;
      float seq = 0;  // a sequential sum: shows the data does tell orders apart
      for (int l = 0; l < 16; ++l) seq += lanes[j][l];
      differing_orders += seq != want;
    }
  }
  EXPECT_GT(differing_orders, 1000) << "test data too benign to distinguish summation orders";
}

}  // namespace
}  // namespace pypto::cpu::avx512
