// f16 weights in column panels (kernels/cpu/f16_panels.h, linear_f16_panels_impl.h): the
// AVX-512 and AVX2 cases at every precision against the scalar reference, bitwise batch
// invariance across m, the same bits from both ISAs, and the tied-embedding lookup from the
// panels.
//
// Tolerance (per element): |y - y_ref| <= bound · Σ_k |x_k w_k| + 2^-24 |bias| (the reference
// accumulates in double). At highest and high x stays f32: the products are exact, one f32 lane
// per output sums them with FMA in increasing k, in blocks of 256 joined by adds (at most
// min(k, 256) + k / 256 <= k + 1 roundings), so bound = (k + 8) · 2^-24. At medium on the bf16-dot
// paths (linear_f16_panels_bf16dot_impl.h) x and W are rounded to bf16 (2^-9 relative each):
// bound = 2^-8 + 2^-18 + (k + 8) · 2^-24 (f16_linear_bound). MediumRoundsBothInputsToBf16 pins
// that path down tighter, against the exact sum of the rounded products.
#include <gtest/gtest.h>

#include "kernel_test_util.h"
#include "panel_test_util.h"
#include "kernels/cpu/f16_panels.h"

namespace pypto::test {
namespace {

std::vector<BackendCase> f16_panel_cases() {
  std::vector<BackendCase> out;
  for (const auto& c : optimised_cases())
    if (c.isa == Isa::Avx512 || c.isa == Isa::Avx2) out.push_back(c);
  return out;
}

// Awkward shapes (panel_test_util.h) within f16_linear_bound of the double reference.
TEST(LinearF16Panels, MatchesReferenceOnAwkwardShapes) {
  const auto cases = f16_panel_cases();
  if (cases.empty()) GTEST_SKIP() << "no AVX2 or AVX-512";
  expect_panels_match_reference(cases, DType::F16, 300, f16_linear_bound);
}

// Bitwise the same alone (the 8- or 4-panel row groups) and in any batch (6-row tiles), 1-3 threads.
TEST(LinearF16Panels, BatchInvariantAcrossM) {
  const auto cases = f16_panel_cases();
  if (cases.empty()) GTEST_SKIP() << "no AVX2 or AVX-512";
  expect_panels_batch_invariant(cases, DType::F16, 41);
}

// The panel kernels sum each output in the same order on every ISA (linear_f16_panels_impl.h), so
// AVX2 (two 8-lane accumulators per panel, 6 x 1-panel tiles, 4-panel row groups) and AVX-512
// (one 16-lane accumulator, 6 x 4-panel tiles, 8-panel row groups) give the same bits, at highest
// and high where both take f32 x. Needs a CPU with AVX-512 to compare against.
TEST(LinearF16Panels, Avx2AndAvx512GiveTheSameBits) {
  if (!cpu_supports(Isa::Avx512)) GTEST_SKIP() << "needs AVX-512 beside AVX2 to compare the two kernels";
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{1, 151, 67}, {1, 129, 600}, {2, 33, 31}, {7, 200, 129}, {16, 70, 1031}};
  uint32_t seed = 900;
  for (MatmulPrecision p : {MatmulPrecision::Highest, MatmulPrecision::High}) {
    auto a2 = make_cpu_backend_for_isa(Isa::Avx2, 2, {}, backend_options(p, CpuLinearKernel::Auto));
    auto a5 = make_cpu_backend_for_isa(Isa::Avx512, 2, {}, backend_options(p, CpuLinearKernel::Auto));
    for (const S& s : shapes) {
      ++seed;
      const auto x = random_f32(size_t(s.m * s.k), seed);
      const auto wb = encode(random_f32(size_t(s.n * s.k), seed + 1), DType::F16);
      const auto bias = random_f32(size_t(s.n), seed + 2);
      const PackedWeight w2(*a2, wb, DType::F16, s.n, s.k), w5(*a5, wb, DType::F16, s.n, s.k);
      std::vector<float> y2(size_t(s.m * s.n), NAN), y5(size_t(s.m * s.n), NAN);
      a2->linear(x.data(), s.m, w2.w, bias.data(), y2.data());
      a5->linear(x.data(), s.m, w5.w, bias.data(), y5.data());
      ASSERT_TRUE(bitwise_equal(y2.data(), y5.data(), y2.size())) << "m=" << s.m << " n=" << s.n << " k=" << s.k;
    }
  }
}

// At medium on the bf16-dot paths, y = Σ_k bf16(x_k) · bf16(w_k) (+ bias) with only the pair
// sums rounded: |y - y_ref| <= (k + 8) · 2^-24 · Σ_k |bf16(x_k) bf16(w_k)| + 2^-24 |bias| against
// that sum in double (VDPBF16PS: the bf16 products are exact in f32, ≤ 2 roundings per pair, k + 1
// for the row). An f32-FMA kernel (W or x not rounded) misses this by ~2^-9 of the magnitude. m = 1
// (rounded in registers as the row streams) and m = 2..17 (the first 6-row tile rounds each group
// into scratch, the others read it), odd k (the zero pad pair), n % 64 != 0.
TEST(LinearF16Panels, MediumRoundsBothInputsToBf16) {
  std::vector<BackendCase> cases;
  for (const auto& c : f16_panel_cases())
    if (f16_runs_bf16dot(c)) cases.push_back(c);
  if (cases.empty()) GTEST_SKIP() << "no AVX-512 BF16 dot-product path at medium";
  struct S {
    int64_t m, n, k;
  };
  const S shapes[] = {{1, 1, 1},   {1, 151, 67},  {1, 129, 2048}, {2, 33, 31},  {6, 64, 33},
                      {7, 200, 129}, {12, 70, 96}, {16, 150, 600}, {17, 47, 1031}};
  uint32_t seed = 700;
  for (const auto& c : cases) {
    auto be = make_case(c);
    for (const S& s : shapes) {
      ++seed;
      const auto x = random_f32(size_t(s.m * s.k), seed);
      const auto wb = encode(random_f32(size_t(s.n * s.k), seed + 1), DType::F16);
      const auto bias = random_f32(size_t(s.n), seed + 2);
      const float* b = seed % 2 ? bias.data() : nullptr;
      const PackedWeight packed(*be, wb, DType::F16, s.n, s.k);
      std::vector<float> y(size_t(s.m * s.n), NAN);
      be->linear(x.data(), s.m, packed.w, b, y.data());
      for (int64_t i = 0; i < s.m; ++i)
        for (int64_t n = 0; n < s.n; ++n) {
          double sum = 0, mag = 0;
          for (int64_t k = 0; k < s.k; ++k) {
            const double p = double(bf16_to_f32(f32_to_bf16(x[size_t(i * s.k + k)]))) *
                             bf16_to_f32(f32_to_bf16(load_as_f32(wb.data(), DType::F16, n * s.k + k)));
            sum += p;
            mag += std::fabs(p);
          }
          if (b) sum += b[n];
          const double tol = (double(s.k) + 8) * kU32 * mag + kU32 * (b ? std::fabs(b[n]) : 0) + 1e-30;
          const double err = std::fabs(double(y[size_t(i * s.n + n)]) - sum);
          ASSERT_LE(err, tol) << c.label << " m=" << s.m << " n=" << s.n << " k=" << s.k << " at [" << i << ","
                              << n << "]";
        }
    }
  }
}

// A tied f16 table is staged once, as the lm_head's panels: the embedding lookup (weight_rows)
// gives each row exactly as the checkpoint's f16 widened to f32, and the layout holds W[r][j] at
// panel r / 16, step j, column r % 16.
TEST(LinearF16Panels, TiedLookupReadsTheF16Rows) {
  const auto cases = f16_panel_cases();
  if (cases.empty()) GTEST_SKIP() << "no AVX2 or AVX-512";
  const int64_t n = 37, k = 67;
  const auto wb = encode(random_f32(size_t(n * k), 51, -70000.0f, 70000.0f), DType::F16);  // up to f16's max
  const auto* plain = reinterpret_cast<const uint16_t*>(wb.data());
  const std::vector<int32_t> ids = {0, 36, 15, 16, 17, 31, 32, 5};
  for (const auto& c : cases) {
    auto be = make_case(c);
    const PackedWeight packed(*be, wb, DType::F16, n, k);
    const auto* p = static_cast<const uint16_t*>(packed.w.data);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < k; ++j)
        ASSERT_EQ(p[(r / 16) * cpu::f16_panel_elems(k) + j * 16 + r % 16], plain[r * k + j]) << r << "," << j;
    std::vector<float> got(ids.size() * size_t(k), NAN);
    be->weight_rows(ids.data(), int64_t(ids.size()), packed.w, got.data());
    for (size_t i = 0; i < ids.size(); ++i)
      for (int64_t j = 0; j < k; ++j) {
        const float want = f16_to_f32(plain[ids[i] * k + j]);
        ASSERT_EQ(std::memcmp(&got[i * size_t(k) + size_t(j)], &want, 4), 0) << c.label << " id " << ids[i] << " k " << j;
      }
  }
}

}  // namespace
}  // namespace pypto::test
