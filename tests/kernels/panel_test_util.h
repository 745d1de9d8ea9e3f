#pragma once
// Shared checks of the column-panel linears (f16 panels: linear_f16_panels_test.cpp; AVX2's bf16
// pair panels: linear_bf16_panels_f32_test.cpp): each backend case against the scalar reference
// on awkward shapes, and bitwise batch invariance across m.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "kernel_test_util.h"

namespace pypto::test {

// n not a multiple of 16 (a partial last panel; 1..8 panels at m = 1; on AVX2 also a last panel
// whose second 8-column half is empty), k odd and not a multiple of 32 (the padded k steps or
// pairs), k across the 256-step blocks, bias or not (by seed); m from 1 (the row groups) to 17
// (several row tiles). bound(c, k): the tolerance as a multiple of Σ_k |x_k w_k|; 2^-24 |bias|
// is added.
inline void expect_panels_match_reference(const std::vector<BackendCase>& cases, DType dtype, uint32_t seed,
                                          const std::function<double(const BackendCase&, int64_t)>& bound) {
  auto ref = make_reference_backend();
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{1, 1, 1},    {1, 17, 5},   {1, 151, 67}, {1, 129, 2048}, {1, 72, 40},  {2, 33, 31},
                      {3, 8, 300},  {5, 80, 100}, {6, 64, 33},  {7, 200, 129},  {16, 70, 96}, {17, 47, 1031}};
  for (const auto& c : cases) {
    auto be = make_case(c);
    ASSERT_FALSE(be->weight_layout_is_plain(dtype)) << c.label;
    for (const S& s : shapes) {
      ++seed;
      const auto x = random_f32(size_t(s.m * s.k), seed);
      const auto wb = encode(random_f32(size_t(s.n * s.k), seed + 1), dtype);
      const auto bias = random_f32(size_t(s.n), seed + 2);
      const float* b = seed % 2 ? bias.data() : nullptr;
      const PackedWeight packed(*be, wb, dtype, s.n, s.k);
      const LinearWeight plain{wb.data(), dtype, s.n, s.k};
      std::vector<float> y(size_t(s.m * s.n), NAN), yr(size_t(s.m * s.n), NAN);
      be->linear(x.data(), s.m, packed.w, b, y.data());
      ref->linear(x.data(), s.m, plain, b, yr.data());
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t n = 0; n < s.n; ++n) {
          double mag = 0;
          for (int64_t k = 0; k < s.k; ++k)
            mag += std::fabs(double(x[size_t(i * s.k + k)]) * load_as_f32(wb.data(), dtype, n * s.k + k));
          const double tol = bound(c, s.k) * mag + kU32 * (b ? std::fabs(b[n]) : 0) + 1e-30;
          const double err = std::fabs(double(y[size_t(i * s.n + n)]) - yr[size_t(i * s.n + n)]);
          ASSERT_LE(err, tol) << c.label << " m=" << s.m << " n=" << s.n << " k=" << s.k << " at [" << i << ","
                              << n << "]";
        }
    }
  }
}

// Row r is bitwise the same computed alone (m = 1: the row groups) or in a batch of any size (the
// row tiles, the last one shorter), at every thread count of `cases`; k = 67 ends on an odd step,
// k = 600 crosses two of the 256-step blocks the sums are taken in.
inline void expect_panels_batch_invariant(const std::vector<BackendCase>& cases, DType dtype, uint32_t seed) {
  for (const int64_t k : {67, 600}) {
    const int64_t n = 151, rows = 40;
    const auto x = random_f32(size_t(rows * k), seed);
    const auto wb = encode(random_f32(size_t(n * k), seed + 1), dtype);
    const auto bias = random_f32(size_t(n), seed + 2);
    for (const auto& c : cases) {
      auto be = make_case(c);
      const PackedWeight packed(*be, wb, dtype, n, k);
      std::vector<float> alone(size_t(rows * n));
      for (int64_t r = 0; r < rows; ++r) be->linear(x.data() + r * k, 1, packed.w, bias.data(), alone.data() + r * n);
      for (int64_t m = 2; m <= 33; ++m) {
        const int64_t first = m % 7;  // other neighbours, other offsets
        std::vector<float> batch(size_t(m * n));
        be->linear(x.data() + first * k, m, packed.w, bias.data(), batch.data());
        for (int64_t r = 0; r < m; ++r)
          ASSERT_TRUE(bitwise_equal(batch.data() + r * n, alone.data() + (first + r) * n, size_t(n)))
              << c.label << " k=" << k << " row " << first + r << " of m=" << m;
      }
    }
  }
}

}  // namespace pypto::test
