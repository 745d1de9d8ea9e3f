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
#include "panel_test_util.h"
#include "kernels/cpu/bf16_panels.h"

namespace pypto::test {
namespace {

std::vector<BackendCase> avx2_cases() {
  std::vector<BackendCase> out;
  for (const auto& c : optimised_cases())
    if (c.isa == Isa::Avx2) out.push_back(c);
  return out;
}

// Awkward shapes (panel_test_util.h: odd k ends on half a pair, partial panels, 1..4 panels at
// m = 1, three 4-row tiles at m = 17) within (k + 8) · 2^-24 · Σ|x w| of the double reference.
TEST(LinearBf16PanelsF32, MatchesReferenceOnAwkwardShapes) {
  const auto cases = avx2_cases();
  if (cases.empty()) GTEST_SKIP() << "no AVX2";
  expect_panels_match_reference(cases, DType::BF16, 500,
                                [](const BackendCase&, int64_t k) { return (double(k) + 8) * kU32; });
}

// Bitwise the same alone (the 4-panel row groups) and in any batch (4-row tiles of one panel),
// 1-3 threads.
TEST(LinearBf16PanelsF32, BatchInvariantAcrossM) {
  const auto cases = avx2_cases();
  if (cases.empty()) GTEST_SKIP() << "no AVX2";
  expect_panels_batch_invariant(cases, DType::BF16, 61);
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
