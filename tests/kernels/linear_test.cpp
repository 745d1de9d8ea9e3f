// linear: every optimised ISA at every matmul precision vs the scalar reference (double
// accumulation), and batch invariance.
//
// Tolerance (per element): |y - y_ref| <= bound · Σ_k |x_k w_k| + 2^-24 |bias|, the worst-case
// rounding bound of the case's kernel path (linear_bound in kernel_test_util.h: at highest
// (ceil(k / 8) + 8) · 2^-24, each lane summing ceil(k / L) <= ceil(k / 8) products with FMA (L = 16
// or 8 lanes), then a tree of <= 4 adds; at high and medium plus the rounding of x to bf16). The
// reference accumulates in double. Weights are the same bf16/f16/f32 values on both sides.
#include <gtest/gtest.h>

#include <tuple>

#include "core/memory.h"
#include "kernel_test_util.h"

namespace pypto::test {
namespace {

struct Shape3 {
  int64_t m, n, k;
};

void check_linear(const BackendCase& c, Backend& opt, Backend& ref, const Shape3& s, DType dtype, bool with_bias,
                  uint32_t seed) {
  auto x = random_f32(s.m * s.k, seed);
  auto wv = random_f32(s.n * s.k, seed + 1);
  auto wb = encode(wv, dtype);
  auto bias = random_f32(s.n, seed + 2);
  const PackedWeight packed(opt, wb, dtype, s.n, s.k);
  const LinearWeight& w_opt = packed.w;
  LinearWeight w_ref{wb.data(), dtype, s.n, s.k};
  const double bound = linear_bound(c, opt, dtype, s.k);
  std::vector<float> y(s.m * s.n, NAN), yr(s.m * s.n, NAN);
  const float* b = with_bias ? bias.data() : nullptr;
  opt.linear(x.data(), s.m, w_opt, b, y.data());
  ref.linear(x.data(), s.m, w_ref, b, yr.data());
  double worst = 0;
  for (int64_t i = 0; i < s.m; ++i)
    for (int64_t n = 0; n < s.n; ++n) {
      double mag = 0;
      for (int64_t k = 0; k < s.k; ++k)
        mag += std::fabs(double(x[i * s.k + k]) * load_as_f32(wb.data(), dtype, n * s.k + k));
      double tol = bound * mag + kU32 * (b ? std::fabs(b[n]) : 0) + 1e-30;
      double err = std::fabs(double(y[i * s.n + n]) - yr[i * s.n + n]);
      worst = std::max(worst, err / tol);
      ASSERT_LE(err, tol) << "m=" << s.m << " n=" << s.n << " k=" << s.k << " dtype=" << dtype_name(dtype)
                          << " at [" << i << "," << n << "]: " << y[i * s.n + n] << " vs " << yr[i * s.n + n];
    }
}

TEST(Linear, MatchesReferenceOnAwkwardShapes) {
  auto ref = make_reference_backend();
  const Shape3 shapes[] = {{1, 1, 1},    {1, 7, 5},    {1, 33, 17},  {3, 19, 31},  {1, 64, 1024},
                           {7, 13, 100}, {8, 50, 129}, {37, 45, 77}, {128, 70, 96}, {9, 6, 16}};
  for (const auto& c : optimised_cases()) {
    auto opt = make_case(c);
    uint32_t seed = 1;
    for (const auto& s : shapes)
      for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
        SCOPED_TRACE(c.label);
        check_linear(c, *opt, *ref, s, dt, seed % 2 == 0, seed);
        ++seed;
      }
  }
}

TEST(Linear, MatchesReferenceOnModelShapes) {
  auto ref = make_reference_backend();
  for (const auto& c : optimised_cases()) {
    if (c.threads != 2) continue;
    auto opt = make_case(c);
    SCOPED_TRACE(c.label);
    check_linear(c, *opt, *ref, {1, 96, 3072}, DType::BF16, false, 7);
    check_linear(c, *opt, *ref, {16, 40, 1024}, DType::BF16, true, 8);
    check_linear(c, *opt, *ref, {9, 20, 2100}, DType::F16, true, 9);  // several k-chunks + tail
  }
}

// Row r of a linear is bitwise the same whether it is computed alone (m = 1, the GEMV path), with
// a few rows (register path) or with many (the widened-W GEMM path), at any thread count.
TEST(Linear, BatchInvariantAcrossM) {
  // k = 2500 > the GEMM path's k-chunk (1024): lane accumulators are saved between chunks.
  for (int64_t k : {211, 2500})
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    const int64_t n = 53;
    auto x = random_f32(128 * k, 11);
    auto wb = encode(random_f32(n * k, 12), dt);
    auto bias = random_f32(n, 13);
    for (const auto& c : optimised_cases()) {
      auto opt = make_case(c);
      const PackedWeight packed(*opt, wb, dt, n, k);
      const LinearWeight& w = packed.w;
      std::vector<float> alone(128 * n);
      for (int64_t r = 0; r < 128; ++r) opt->linear(x.data() + r * k, 1, w, bias.data(), alone.data() + r * n);
      for (int64_t m : {2, 3, 7, 8, 9, 37, 128}) {
        std::vector<float> batch(m * n);
        opt->linear(x.data(), m, w, bias.data(), batch.data());
        for (int64_t r = 0; r < m; ++r)
          ASSERT_TRUE(bitwise_equal(batch.data() + r * n, alone.data() + r * n, n))
              << c.label << " " << dtype_name(dt) << " k=" << k << " row " << r << " of m=" << m;
      }
      // The same row in a different batch (other neighbours, other offset).
      std::vector<float> shifted(37 * n);
      opt->linear(x.data() + 50 * k, 37, w, bias.data(), shifted.data());
      for (int64_t r = 0; r < 37; ++r)
        ASSERT_TRUE(bitwise_equal(shifted.data() + r * n, alone.data() + (50 + r) * n, n)) << c.label << " row " << r;
    }
  }
}

// The kernel paths (ISA x precision) need not agree bitwise with each other, but a path's result
// must not depend on its thread count.
TEST(Linear, ThreadCountDoesNotChangeResults) {
  const int64_t m = 37, n = 300, k = 1000;
  auto x = random_f32(m * k, 21);
  auto wb = encode(random_f32(n * k, 22), DType::BF16);
  std::vector<std::string> paths;
  for (const auto& c : optimised_cases())
    if (std::find(paths.begin(), paths.end(), c.path) == paths.end()) paths.push_back(c.path);
  for (const std::string& path : paths) {
    std::vector<float> first;
    for (const auto& c : optimised_cases()) {
      if (c.path != path) continue;
      auto opt = make_case(c);
      const PackedWeight packed(*opt, wb, DType::BF16, n, k);
      std::vector<float> y(m * n);
      opt->linear(x.data(), m, packed.w, nullptr, y.data());
      if (first.empty())
        first = y;
      else
        ASSERT_TRUE(bitwise_equal(first.data(), y.data(), y.size())) << c.label;
    }
  }
}

// bf16 weights stay plain rows on the f32 path (highest) and are packed on the bf16-dot paths;
// f16 weights are packed as column panels on AVX-512 and AVX2 at every precision.
TEST(Linear, PlainLayoutAndPackedSize) {
  for (const auto& c : optimised_cases()) {
    auto opt = make_case(c);
    // bf16 stays plain only for AVX-512's f32 kernel (highest); AVX2 packs pair panels for its f32
    // FMA kernel at every precision (linear_bf16_panels_f32_impl.h), the bf16-dot / AMX kernels too.
    EXPECT_EQ(opt->weight_layout_is_plain(DType::BF16), c.isa == Isa::Avx512 && c.precision == MatmulPrecision::Highest)
        << c.label;
    EXPECT_FALSE(opt->weight_layout_is_plain(DType::F16)) << c.label;
    EXPECT_TRUE(opt->weight_layout_is_plain(DType::F32)) << c.label;
    EXPECT_EQ(opt->packed_weight_bytes(DType::BF16, 3, 5) % 64, 0u);
    EXPECT_GE(opt->packed_weight_bytes(DType::BF16, 3, 5), 30u);
  }
}

}  // namespace
}  // namespace pypto::test

namespace pypto::test {
namespace {

// The optional bf16-dot paths (CpuBackendOptions::bf16_activations / split_bf16_activations,
// AVX-512 BF16 only):
//  (1) against the reference fed the x the kernel sees (bf16(x), or hi + lo), within the bound of
//      its order: one f32 lane sums the k products in pairs (up to 2 roundings per pair, twice with
//      hi + lo), so (2k + 8) · 2^-24 · Σ|x w| (weights in pair panels, bf16_panels.h);
//  (2) batch-invariant bitwise across m;
//  (3) its error against the true f32-x product is printed: that is the cost of the option.
TEST(LinearBf16Activations, MatchesRoundedReferenceAndIsBatchInvariant) {
  const CpuFeatures& f = cpu_features();
  if (!(f.avx512f && f.avx512_bf16)) GTEST_SKIP() << "no AVX512_BF16";
  auto ref = make_reference_backend();
  for (bool split : {false, true}) {
    CpuBackendOptions opt;
    opt.bf16_activations = !split;
    opt.split_bf16_activations = split;
    opt.linear_kernel = CpuLinearKernel::Bf16Dot;  // the AMX kernel has its own test (linear_amx_test.cpp)
    for (int threads : {1, 2}) {
      auto be = make_cpu_backend_for_isa(Isa::Avx512, threads, {}, opt);
      for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 37, 1}, {3, 19, 33}, {37, 64, 1024}, {7, 200, 129},
                             {128, 50, 3072}, {9, 13, 100}, {130, 7, 40}}) {
        auto x = random_f32(m * k, 101);
        // What the kernel sees: bf16(x), or bf16(x) + bf16(x - bf16(x)) (exact in f32).
        auto xr = x;
        for (auto& v : xr) {
          float hi = bf16_to_f32(f32_to_bf16(v));
          v = split ? hi + bf16_to_f32(f32_to_bf16(v - hi)) : hi;
        }
        auto wb = encode(random_f32(n * k, 102), DType::BF16);
        auto bias = random_f32(n, 103);
        ASSERT_FALSE(be->weight_layout_is_plain(DType::BF16));
        AlignedBuffer packed(be->packed_weight_bytes(DType::BF16, n, k));
        be->pack_weight(wb.data(), DType::BF16, n, k, packed.data());
        LinearWeight w{packed.data(), DType::BF16, n, k};
        LinearWeight w_plain{wb.data(), DType::BF16, n, k};
        std::vector<float> y(m * n), yr(m * n), yt(m * n);
        be->linear(x.data(), m, w, bias.data(), y.data());
        ref->linear(xr.data(), m, w_plain, bias.data(), yr.data());
        ref->linear(x.data(), m, w_plain, bias.data(), yt.data());
        double worst_true = 0, scale = 0;
        for (int64_t i = 0; i < m; ++i)
          for (int64_t c = 0; c < n; ++c) {
            double mag = 0;
            for (int64_t kk = 0; kk < k; ++kk)
              mag += std::fabs(double(xr[i * k + kk]) * load_as_f32(wb.data(), DType::BF16, c * k + kk));
            double tol = (2.0 * double(k) * (split ? 2 : 1) + 8) * kU32 * mag + kU32 * std::fabs(bias[c]) + 1e-30;
            ASSERT_LE(std::fabs(double(y[i * n + c]) - yr[i * n + c]), tol) << "split=" << split << " m=" << m << " k=" << k;
            worst_true = std::max(worst_true, std::fabs(double(y[i * n + c]) - yt[i * n + c]));
            scale = std::max(scale, std::fabs(double(yt[i * n + c])));
          }
        if (threads == 1 && k >= 1024)
          std::printf("  %s activations, k=%lld: max|y - y_f64| / max|y| = %.2e\n", split ? "split bf16x2" : "bf16",
                      (long long)k, worst_true / scale);
        // Batch invariance: row r alone equals row r in the batch.
        for (int64_t r : {int64_t(0), m / 2, m - 1}) {
          std::vector<float> one(n);
          be->linear(x.data() + r * k, 1, w, bias.data(), one.data());
          ASSERT_TRUE(bitwise_equal(one.data(), y.data() + r * n, n)) << "split=" << split << " row " << r << " of m=" << m;
        }
      }
    }
  }
}

// For comparison: the f32 path's (highest) error against the f64 reference at the same shapes.
TEST(Linear, F32ActivationErrorAgainstF64) {
  auto ref = make_reference_backend();
  for (const auto& c : optimised_cases()) {
    if (c.threads != 1 || c.precision != MatmulPrecision::Highest) continue;
    auto be = make_case(c);
    for (int64_t k : {1024, 3072}) {
      const int64_t m = 4, n = 64;
      auto x = random_f32(m * k, 101);
      auto wb = encode(random_f32(n * k, 102), DType::BF16);
      const LinearWeight w{wb.data(), DType::BF16, n, k};
      const PackedWeight packed(*be, wb, DType::BF16, n, k);  // plain rows, or AVX2's pair panels
      std::vector<float> y(m * n), yt(m * n);
      be->linear(x.data(), m, packed.w, nullptr, y.data());
      ref->linear(x.data(), m, w, nullptr, yt.data());
      double worst = 0, scale = 0;
      for (int64_t i = 0; i < m * n; ++i) {
        worst = std::max(worst, std::fabs(double(y[i]) - yt[i]));
        scale = std::max(scale, std::fabs(double(yt[i])));
      }
      std::printf("  f32 activations (%s), k=%lld: max|y - y_f64| / max|y| = %.2e\n", c.label.c_str(), (long long)k,
                  worst / scale);
      EXPECT_LT(worst / scale, 1e-5);
    }
  }
}

// The kernel `auto` picks for bf16 weights at high is a rule of the CPU (cpu_backend.h
// bf16dot_at_full_rate: the bf16 dot product on AMD, f32 FMA elsewhere), never a timing taken at
// start-up: a timing on a loaded machine once made one process round differently from the next.
TEST(Linear, AutoKernelAtHighIsARuleOfTheCpuNotATiming) {
  const CpuFeatures& f = cpu_features();
  if (cpu_isa() != Isa::Avx512 || !f.avx512_bf16 || amx_usable())
    GTEST_SKIP() << "needs AVX-512 BF16 without usable AMX (the case where auto chooses between bf16 dot and f32)";
  CpuBackendOptions o;
  o.split_bf16_activations = true;
  const std::string want = f.vendor_amd ? "cpu-avx512-bf16x2act" : "cpu-avx512";
  EXPECT_EQ(bf16dot_at_full_rate(f), f.vendor_amd);
  EXPECT_EQ(make_cpu_backend_for_isa(Isa::Avx512, 2, {}, o)->name(), want);
  CpuFeatures other = f;
  other.vendor_amd = !f.vendor_amd;
  EXPECT_EQ(bf16dot_at_full_rate(other), other.vendor_amd);
}

}  // namespace
}  // namespace pypto::test
