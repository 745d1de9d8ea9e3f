// bf16 weights in pair panels meeting f32 x on f32 FMA (AVX2: kernels/cpu/bf16_panels.h,
// linear_bf16_panels_f32_impl.h): against the scalar reference, bitwise batch invariance across m
// and thread counts, and the tied-embedding lookup from the panels.
//
// Tolerance (per element): |y - y_ref| <= (k + 8) · 2^-24 · Σ_k |x_k w_k| + 2^-24 |bias| (the
// reference accumulates in double): the products of f32 x and bf16 W are exact in f32, and one f32
// lane per output sums them with FMA in increasing k, in blocks of 256 joined by adds (at most
// min(k, 256) + k / 256 <= k + 1 roundings). A kernel that swapped a pair's halves, read the pad
// past an odd k or dropped a block misses this by the size of a product.
#include <gtest/gtest.h>

#include <cstring>

#include "kernel_test_util.h"
#include "kernels/cpu/bf16_panels.h"

namespace pypto::test {
namespace {

std::vector<BackendCase> avx2_cases() {
  std::vector<BackendCase> out;
  for (const auto& c : optimised_cases())
    if (c.isa == Isa::Avx2) out.push_back(c);
  return out;
}

// n not a multiple of 16 (a partial last panel; 1..4 panels at m = 1; a last panel whose second
// 8-column half is empty), k odd (the last step half a pair) and not a multiple of 32 (the padded
// pairs), k across the 256-step blocks, bias or not; m from 1 to 17 (three 6-row tiles).
TEST(LinearBf16PanelsF32, MatchesReferenceOnAwkwardShapes) {
  const auto cases = avx2_cases();
  if (cases.empty()) GTEST_SKIP() << "no AVX2";
  auto ref = make_reference_backend();
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{1, 1, 1},    {1, 17, 5},   {1, 151, 67}, {1, 129, 2048}, {1, 72, 40},  {2, 33, 31},
                      {3, 8, 300},  {5, 80, 100}, {6, 64, 33},  {7, 200, 129},  {16, 70, 96}, {17, 47, 1031}};
  uint32_t seed = 500;
  for (const auto& c : cases) {
    auto be = make_case(c);
    ASSERT_FALSE(be->weight_layout_is_plain(DType::BF16)) << c.label;
    for (const S& s : shapes) {
      ++seed;
      const auto x = random_f32(size_t(s.m * s.k), seed);
      const auto wb = encode(random_f32(size_t(s.n * s.k), seed + 1), DType::BF16);
      const auto bias = random_f32(size_t(s.n), seed + 2);
      const float* b = seed % 2 ? bias.data() : nullptr;
      const PackedWeight packed(*be, wb, DType::BF16, s.n, s.k);
      const LinearWeight plain{wb.data(), DType::BF16, s.n, s.k};
      std::vector<float> y(size_t(s.m * s.n), NAN), yr(size_t(s.m * s.n), NAN);
      be->linear(x.data(), s.m, packed.w, b, y.data());
      ref->linear(x.data(), s.m, plain, b, yr.data());
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t n = 0; n < s.n; ++n) {
          double mag = 0;
          for (int64_t k = 0; k < s.k; ++k)
            mag += std::fabs(double(x[size_t(i * s.k + k)]) * load_as_f32(wb.data(), DType::BF16, n * s.k + k));
          const double tol = (double(s.k) + 8) * kU32 * mag + kU32 * (b ? std::fabs(b[n]) : 0) + 1e-30;
          const double err = std::fabs(double(y[size_t(i * s.n + n)]) - yr[size_t(i * s.n + n)]);
          ASSERT_LE(err, tol) << c.label << " m=" << s.m << " n=" << s.n << " k=" << s.k << " at [" << i << ","
                              << n << "]";
        }
    }
  }
}

// Row r is bitwise the same computed alone (m = 1: the 4-panel row groups) or in a batch of any
// size (6-row tiles of one panel, the last tile shorter), at 1, 2 or 3 threads; k = 67 ends on
// half a pair, k = 600 crosses two of the 256-step blocks.
TEST(LinearBf16PanelsF32, BatchInvariantAcrossM) {
  const auto cases = avx2_cases();
  if (cases.empty()) GTEST_SKIP() << "no AVX2";
  for (const int64_t k : {67, 600}) {
    const int64_t n = 151, rows = 40;
    const auto x = random_f32(size_t(rows * k), 61);
    const auto wb = encode(random_f32(size_t(n * k), 62), DType::BF16);
    const auto bias = random_f32(size_t(n), 63);
    for (const auto& c : cases) {
      auto be = make_case(c);
      const PackedWeight packed(*be, wb, DType::BF16, n, k);
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

// A tied bf16 table is staged once, as the lm_head's pair panels: the embedding lookup
// (weight_rows) gives each row exactly as the checkpoint's bf16 widened to f32, and the layout
// holds W[r][j] at panel r / 16, pair j / 2, column r % 16, slot j % 2.
TEST(LinearBf16PanelsF32, TiedLookupReadsTheBf16Rows) {
  const auto cases = avx2_cases();
  if (cases.empty()) GTEST_SKIP() << "no AVX2";
  const int64_t n = 37, k = 67;
  const auto wb = encode(random_f32(size_t(n * k), 71, -3.0e38f, 3.0e38f), DType::BF16);
  const auto* plain = reinterpret_cast<const uint16_t*>(wb.data());
  const std::vector<int32_t> ids = {0, 36, 15, 16, 17, 31, 32, 5};
  for (const auto& c : cases) {
    auto be = make_case(c);
    const PackedWeight packed(*be, wb, DType::BF16, n, k);
    const auto* p = static_cast<const uint16_t*>(packed.w.data);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < k; ++j)
        ASSERT_EQ(p[(r / 16) * cpu::bf16_panel_elems(k) + (j / 2) * 32 + (r % 16) * 2 + j % 2], plain[r * k + j])
            << r << "," << j;
    std::vector<float> got(ids.size() * size_t(k), NAN);
    be->weight_rows(ids.data(), int64_t(ids.size()), packed.w, got.data());
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t j = 0; j < k; ++j) {
        const float want = bf16_to_f32(plain[ids[i] * k + j]);
        ASSERT_EQ(std::memcmp(&got[i * size_t(k) + size_t(j)], &want, 4), 0) << c.label << " id " << ids[i] << " k " << j;
      }
  }
}

}  // namespace
}  // namespace pypto::test
