// Quantized linears (WeightFormat Int8 / Int4 / Fp8) of the optimised CPU backend against the scalar
// reference backend, on the same QuantizedWeight: awkward shapes (rows, columns and k off every
// tile; partial last groups; odd group sizes), f32, bf16-pair (high) and int8 (medium)
// activations, with a bias and without. Then batch invariance at every precision: a row's output
// is bitwise the same alone and inside batches of 16, 17 and 33 rows (which switch Int8 from
// VNNI to AMX-INT8 where the CPU has it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "kernels/backend.h"
#include "kernels/cpu/kernel_table.h"
#include "kernel_test_util.h"
#include "quant_test_util.h"

namespace pypto::test {
namespace {

bool has_quant_kernels() {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  return kt && kt->linear_cols_dq;
}

struct Case {
  WeightFormat format;
  int32_t group;
  int64_t m, n, k;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  // m = 2..8: one int4 pass of m rows (tiles of 2 rows x 4 panels .. 8 rows x 1 panel); 9, 17, 33:
  // blocks of 8 rows and a remainder.
  for (int64_t m : {1, 2, 3, 5, 8, 9, 16, 17, 33})
    // n = 150: three int4 super-panels (a lone row walks two side by side, then one).
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 8}, {17, 200}, {100, 1024}, {33, 136}, {150, 256}}) {
      v.push_back({WeightFormat::Int8, 0, m, n, k + 3});  // k off the quad
      v.push_back({WeightFormat::Int4, 32, m, n, k});
      v.push_back({WeightFormat::Int4, 128, m, n, k});    // partial last group for k = 200, 136
      v.push_back({WeightFormat::Int4, 24, m, n, k});     // a group that is no power of two
      v.push_back({WeightFormat::Fp8, 128, m, n, k + 5});
    }
  return v;
}

// |y − ref| ≤ rel · Σ_k |x w| + 1e-30 per output, Σ|x w| from the reference run on |x| and |W|.
void run_case(const Case& c, QuantActivations act, MatmulPrecision prec, int threads) {
  SCOPED_TRACE(testing::Message() << weight_format_name(c.format) << " g" << c.group << " m" << c.m << " n" << c.n
                                  << " k" << c.k << " " << quant_activations_name(act) << "-act threads " << threads);
  const bool int8_act = act == QuantActivations::Int8;
  RandomQuant rq = random_quant(c.format, c.n, c.k, c.group, static_cast<uint32_t>(c.m * 131 + c.n * 7 + c.k));
  auto ref = make_reference_backend(act);
  auto opt = make_cpu_backend(threads, {}, prec);
  ASSERT_EQ(opt->quant_activations(), act);
  Staged sr = stage(*ref, rq.w), so = stage(*opt, rq.w);
  std::vector<float> x = random_f32(static_cast<size_t>(c.m * c.k), 7u + static_cast<uint32_t>(c.k), -2.0f, 2.0f);
  std::vector<float> bias = random_f32(static_cast<size_t>(c.n), 3u);
  for (bool with_bias : {false, true}) {
    const float* b = with_bias ? bias.data() : nullptr;
    std::vector<float> yr(static_cast<size_t>(c.m * c.n)), yo(yr.size(), NAN), mag(yr.size());
    ref->linear(x.data(), c.m, sr.lw, b, yr.data());
    opt->linear(x.data(), c.m, so.lw, b, yo.data());
    // A bound on Σ_k |x w| per output: Σ|x| · max|w|.
    std::vector<float> ax(x.size());
    for (size_t i = 0; i < x.size(); ++i) ax[i] = std::fabs(x[i]);
    float wmax = 0;
    std::vector<float> row(static_cast<size_t>(c.k));
    for (int64_t r = 0; r < c.n; ++r) {
      int32_t id = static_cast<int32_t>(r);
      ref->weight_rows(&id, 1, sr.lw, row.data());
      for (float v : row) wmax = std::max(wmax, std::fabs(v));
    }
    for (int64_t i = 0; i < c.m; ++i) {
      double sx = 0;
      for (int64_t j = 0; j < c.k; ++j) sx += ax[size_t(i * c.k + j)];
      for (int64_t n = 0; n < c.n; ++n) mag[size_t(i * c.n + n)] = static_cast<float>(sx * wmax);
    }
    // f32 activations: k roundings of f32 FMA; int8 activations: the integer sums are exact and
    // only the f32 epilogue rounds (a few roundings per group). bf16-pair activations: the same x
    // as the reference (hi + lo), two f32 roundings per VDPBF16PS; Int4 sums (16 + q) · x, terms
    // up to ~2 · max|w| · |x| (31 against 15 steps), then subtracts (16 + zero) · Σ x: twice the
    // bound.
    const bool pair = act == QuantActivations::Bf16Pair && c.format != WeightFormat::Fp8;
    const double rel = int8_act && c.format != WeightFormat::Fp8 ? 64 * kU32
                       : pair && c.format == WeightFormat::Int4 ? (4.0 * c.k + 64) * kU32
                                                                : (2.0 * c.k + 8) * kU32;
    for (size_t i = 0; i < yr.size(); ++i)
      ASSERT_LE(std::fabs(yo[i] - yr[i]), rel * mag[i] + 1e-30) << "output " << i << ": " << yo[i] << " vs " << yr[i];
  }
}

TEST(LinearQuant, MatchesReferenceWithF32Activations) {
  if (!has_quant_kernels()) GTEST_SKIP() << "no vector quantized kernels on this CPU (needs AVX2 or AVX-512)";
  for (const Case& c : cases()) run_case(c, QuantActivations::F32, MatmulPrecision::Highest, 2);
}

// High: x as hi + lo bf16 against the reference's same definition; one thread for the largest m
// too (other column chunks).
TEST(LinearQuant, MatchesReferenceWithBf16PairActivations) {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  if (!kt || !kt->linear_cols_q8_bf16) GTEST_SKIP() << "this CPU has no AVX512_BF16: high runs f32 activations here";
  for (const Case& c : cases()) run_case(c, QuantActivations::Bf16Pair, MatmulPrecision::High, 2);
  for (const Case& c : cases())
    if (c.m == 33) run_case(c, QuantActivations::Bf16Pair, MatmulPrecision::High, 1);
}

// The bf16-pair result against the exact (f32-activation) reference: within the ~2^-16 relative
// rounding of x plus the f32 sums, measured and bounded here (max |Δ| / Σ|x w| over all cases).
TEST(LinearQuant, Bf16PairActivationsStayNearExact) {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  if (!kt || !kt->linear_cols_q8_bf16) GTEST_SKIP() << "this CPU has no AVX512_BF16: high runs f32 activations here";
  for (auto [f, g] : {std::pair<WeightFormat, int32_t>{WeightFormat::Int8, 0}, {WeightFormat::Int4, 128}}) {
    const int64_t m = 3, n = 256, k = 3072;
    RandomQuant rq = random_quant(f, n, k, g, 17);
    auto ref = make_reference_backend(QuantActivations::F32);
    auto opt = make_cpu_backend(2, {}, MatmulPrecision::High);
    Staged sr = stage(*ref, rq.w), so = stage(*opt, rq.w);
    std::vector<float> x = random_f32(static_cast<size_t>(m * k), 11u, -2.0f, 2.0f);
    std::vector<float> yr(static_cast<size_t>(m * n)), yo(yr.size()), ymax(yr.size());
    ref->linear(x.data(), m, sr.lw, nullptr, yr.data());
    opt->linear(x.data(), m, so.lw, nullptr, yo.data());
    double worst = 0, ymag = 0;
    for (size_t i = 0; i < yr.size(); ++i) {
      worst = std::max(worst, double(std::fabs(yo[i] - yr[i])));
      ymag = std::max(ymag, double(std::fabs(yr[i])));
    }
    // ~1e-5 of max|y| is what bf16 weights get at high (linear_test.cpp: 2.1e-6 .. 3.3e-6).
    EXPECT_LE(worst / ymag, 2e-5) << weight_format_name(f) << ": max|Δy| / max|y| = " << worst / ymag;
    std::printf("[ measured ] %s high vs exact: max|dy| / max|y| = %.2e (k %lld)\n", weight_format_name(f),
                worst / ymag, static_cast<long long>(k));
  }
}

TEST(LinearQuant, MatchesReferenceWithInt8Activations) {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  if (!kt || !kt->linear_cols_q8) GTEST_SKIP() << "this CPU has no AVX512_VNNI: int8 activations do not run here";
  for (const Case& c : cases()) run_case(c, QuantActivations::Int8, MatmulPrecision::Medium, 2);
  for (const Case& c : cases())
    if (c.m == 33) run_case(c, QuantActivations::Int8, MatmulPrecision::Medium, 1);
}

// Row i computed alone equals row i inside batches of 2 .. 9, 16, 17 and 33 rows, bit for bit (every
// int4 row tile; n = 300 ends in a partial super-panel).
TEST(LinearQuant, BatchInvariant) {
  if (!has_quant_kernels()) GTEST_SKIP() << "no vector quantized kernels on this CPU (needs AVX2 or AVX-512)";
  for (MatmulPrecision prec : {MatmulPrecision::Highest, MatmulPrecision::High, MatmulPrecision::Medium})
    for (auto [f, g] : {std::pair<WeightFormat, int32_t>{WeightFormat::Int8, 0}, {WeightFormat::Int4, 64}, {WeightFormat::Fp8, 128}}) {
      SCOPED_TRACE(testing::Message() << weight_format_name(f) << " " << matmul_precision_name(prec));
      const int64_t n = 300, k = 1024;
      RandomQuant rq = random_quant(f, n, k, g, 99);
      auto be = make_cpu_backend(2, {}, prec);
      Staged s = stage(*be, rq.w);
      std::vector<float> x = random_f32(static_cast<size_t>(33 * k), 5u);
      std::vector<float> alone(static_cast<size_t>(n));
      for (int64_t rows : {2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 33}) {
        std::vector<float> y(static_cast<size_t>(rows * n));
        be->linear(x.data(), rows, s.lw, nullptr, y.data());
        std::vector<int64_t> check = {0, rows / 2, rows - 1};
        if (rows <= 9)
          for (int64_t i = 1; i + 1 < rows; ++i) check.push_back(i);
        for (int64_t i : check) {
          be->linear(x.data() + i * k, 1, s.lw, nullptr, alone.data());
          ASSERT_EQ(0, std::memcmp(alone.data(), y.data() + i * n, sizeof(float) * size_t(n))) << "row " << i << " of " << rows;
        }
      }
    }
}

// The lookup of a quantized, tied embedding table returns the dequantized rows exactly.
TEST(LinearQuant, WeightRowsDequantizeExactly) {
  if (!has_quant_kernels()) GTEST_SKIP() << "no vector quantized kernels on this CPU (needs AVX2 or AVX-512)";
  for (auto [f, g] : {std::pair<WeightFormat, int32_t>{WeightFormat::Int8, 0}, {WeightFormat::Int4, 32}, {WeightFormat::Fp8, 128}}) {
    RandomQuant rq = random_quant(f, 37, 200, g, 5);
    auto ref = make_reference_backend();
    auto opt = make_cpu_backend(2);
    Staged sr = stage(*ref, rq.w), so = stage(*opt, rq.w);
    std::vector<int32_t> ids = {0, 36, 17, 16, 15, 5};
    std::vector<float> a(ids.size() * 200), b(a.size());
    ref->weight_rows(ids.data(), int64_t(ids.size()), sr.lw, a.data());
    opt->weight_rows(ids.data(), int64_t(ids.size()), so.lw, b.data());
    ASSERT_EQ(a, b) << weight_format_name(f);
  }
}

}  // namespace
}  // namespace pypto::test
