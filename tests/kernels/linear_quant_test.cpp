// Quantized linears (WeightFormat Int8 / Int4 / Fp8) of the optimised CPU backend against the scalar
// reference backend, on the same QuantizedWeight: awkward shapes (rows, columns and k off every
// tile; partial last groups; odd group sizes), f32, bf16-pair (high), int16 (high on AVX2) and
// int8 (medium) activations, with a bias and without. Then batch invariance at every precision: a row's output
// is bitwise the same alone and inside batches of 16, 17 and 33 rows (which switch Int8 from
// VNNI to AMX-INT8 where the CPU has it). Int8 activations run on AVX-512 VNNI and on AVX2
// (linear_quant_avx2.cpp); each test runs what this CPU's table has and skips the rest.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu_features.h"
#include "core/dtype.h"
#include "core/memory.h"
#include "kernels/backend.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_panels.h"
#include "kernel_test_util.h"
#include "quant_test_util.h"

namespace pypto::test {
namespace {

bool has_quant_kernels() {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  return kt && kt->linear_cols_dq;
}

// Whether the optimised backend runs `f` weights at `prec` on this CPU: int8 activations (medium,
// Int8 / Int4) need linear_cols_q8 (AVX-512 VNNI or AVX2); high takes bf16 pairs (AVX512_BF16) or
// int16 (AVX2); everything else ends in the f32-activation kernel linear_cols_dq (Fp8 always).
bool runs_quant(MatmulPrecision prec, WeightFormat f) {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  if (!kt) return false;
  if (prec == MatmulPrecision::Medium && f != WeightFormat::Fp8 && kt->linear_cols_q8) return true;
  return kt->linear_cols_dq != nullptr;
}

struct Case {
  WeightFormat format;
  int32_t group;
  int64_t m, n, k;
};

std::vector<Case> cases() {
  std::vector<Case> v;
  // m = 2..8: one int4 pass of m rows (AVX-512: tiles of 2 rows x 4 panels .. 8 rows x 1 panel;
  // AVX2: one tile of all the rows over each super-panel, a group or activation block at a time);
  // 9, 17, 33: blocks of 8 rows and a remainder.
  for (int64_t m : {1, 2, 3, 5, 8, 9, 16, 17, 33})
    // n = 150: three int4 super-panels (a lone row walks two side by side, then one).
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 8}, {17, 200}, {100, 1024}, {33, 136}, {150, 256}}) {
      v.push_back({WeightFormat::Int8, 0, m, n, k + 3});  // k off the quad
      v.push_back({WeightFormat::Int4, 32, m, n, k});
      v.push_back({WeightFormat::Int4, 128, m, n, k});    // partial last group for k = 200, 136
      v.push_back({WeightFormat::Int4, 24, m, n, k});     // a group that is no power of two
      v.push_back({WeightFormat::Int4, 256, m, n, k});    // AVX2 at medium: past the group tile's buffer
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
    const double err = high_error_vs_exact(f, g, 1.0f);
    // ~1e-5 of max|y| is what bf16 weights get at high (linear_test.cpp: 2.1e-6 .. 3.3e-6).
    EXPECT_LE(err, 2e-5) << weight_format_name(f) << ": max|Δy| / max|y| = " << err;
    std::printf("[ measured ] %s high vs exact: max|dy| / max|y| = %.2e (k 3072)\n", weight_format_name(f), err);
  }
}

// High on AVX2 (no bf16 dot product): x as int16 per row and block against the reference's same
// integers (backend.h int16_block_inv); one thread for the largest m too. The quantizer itself,
// the sums at the ends of their range and the error against exact activations are in
// linear_quant_i16_test.cpp.
TEST(LinearQuant, MatchesReferenceWithInt16Activations) {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  if (!kt || !kt->linear_cols_q8_i16 || kt->linear_cols_q8_bf16)
    GTEST_SKIP() << "high runs int16 activations only on AVX2 (this CPU: " << (kt ? kt->name : "scalar") << ")";
  for (const Case& c : cases())
    if (c.format != WeightFormat::Fp8) run_case(c, QuantActivations::Int16, MatmulPrecision::High, 2);
  for (const Case& c : cases())
    if (c.m == 33 && c.format != WeightFormat::Fp8) run_case(c, QuantActivations::Int16, MatmulPrecision::High, 1);
}

TEST(LinearQuant, MatchesReferenceWithInt8Activations) {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  if (!kt || !kt->linear_cols_q8) GTEST_SKIP() << "no int8-activation kernels (AVX-512 VNNI or AVX2) on this CPU";
  // Fp8 runs f32 activations (linear_cols_dq) at every precision.
  for (const Case& c : cases())
    if (runs_quant(MatmulPrecision::Medium, c.format)) run_case(c, QuantActivations::Int8, MatmulPrecision::Medium, 2);
  for (const Case& c : cases())
    if (c.m == 33 && runs_quant(MatmulPrecision::Medium, c.format))
      run_case(c, QuantActivations::Int8, MatmulPrecision::Medium, 1);
}

// Int8 weights at the ends of s8 (-128 included, though the quantizer stops at ±127) against x at
// ±amax (xq = ±127), signs chosen so that every product of a row has the same sign: the pair sums
// of a u8 × s8 multiply (VPMADDUBSW on AVX2) reach ±2 · 128 · 127, just inside s16; a kernel that
// saturated there, or lost the sign of a term, would be off by far more than the epilogue's roundings.
TEST(LinearQuant, Int8ActivationsExactAtTheEnds) {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  if (!kt || !kt->linear_cols_q8) GTEST_SKIP() << "no int8-activation kernels (AVX-512 VNNI or AVX2) on this CPU";
  const int64_t n = 40, k = 260;
  RandomQuant rq = random_quant(WeightFormat::Int8, n, k, 0, 3);
  std::vector<float> x(size_t(3 * k));
  for (int64_t j = 0; j < k; ++j) {
    x[size_t(j)] = (j % 3 == 0) ? -1.0f : 1.0f;           // row 0: xq = ±127
    x[size_t(k + j)] = (j % 2 == 0) ? 1.0f : -1.0f;       // row 1
    x[size_t(2 * k + j)] = float(j % 7) / 6.0f - 0.5f;    // row 2: mixed, amax 0.5
  }
  for (int64_t r = 0; r < n; ++r)
    for (int64_t j = 0; j < k; ++j) {
      // Column r: the same sign as row 0's x (even r) or the opposite (odd r); magnitudes 128 / 127.
      const int mag = (r + j) % 4 == 0 ? 127 : 128;
      const bool neg = (x[size_t(j)] < 0) != (r % 2 == 1);
      rq.q8[size_t(r * k + j)] = static_cast<int8_t>(neg ? -mag : (mag == 128 ? 127 : mag));
    }
  for (int threads : {1, 2}) {
    auto ref = make_reference_backend(QuantActivations::Int8);
    auto opt = make_cpu_backend(threads, {}, MatmulPrecision::Medium);
    ASSERT_EQ(opt->quant_activations(), QuantActivations::Int8);
    Staged sr = stage(*ref, rq.w), so = stage(*opt, rq.w);
    for (int64_t m : {1, 3}) {
      std::vector<float> yr(size_t(m * n)), yo(yr.size(), NAN);
      ref->linear(x.data(), m, sr.lw, nullptr, yr.data());
      opt->linear(x.data(), m, so.lw, nullptr, yo.data());
      for (size_t i = 0; i < yr.size(); ++i)
        ASSERT_LE(std::fabs(yo[i] - yr[i]), 8 * kU32 * std::fabs(yr[i]) + 1e-30)
            << "m " << m << " output " << i << ": " << yo[i] << " vs " << yr[i];
    }
  }
}

// quantize_row_int8 of every vector table this CPU builds against its scalar definition
// (kernel_table.h; backend.h int8_row_inv): the same amax, bytes (shifted or not, zeros to ld) and
// group sums, exactly. Lengths off every vector width; x with exact ties (x · inv = j + 0.5, which
// round to even) and a zero row.
TEST(LinearQuant, QuantizeRowInt8MatchesScalar) {
  std::vector<const cpu::KernelTable*> tables;
  if (cpu_isa() >= Isa::Avx2) tables.push_back(&cpu::kernel_table_avx2());
  if (cpu_isa() >= Isa::Avx512) tables.push_back(&cpu::kernel_table_avx512());
  int tested = 0;
  for (const cpu::KernelTable* kt : tables) {
    if (!kt->quantize_row_int8) continue;
    ++tested;
    for (int64_t k : {1, 7, 8, 9, 31, 32, 33, 63, 100, 1024, 1027})
      for (int kind = 0; kind < 3; ++kind) {
        std::vector<float> x = random_f32(size_t(k), uint32_t(k * 3 + kind), -3.0f, 3.0f);
        if (kind == 1) {  // amax 127 → inv 1: every value k / 2 is a tie
          for (int64_t j = 0; j < k; ++j) x[size_t(j)] = float((j * 37) % 255 - 127) / 2.0f;
          x[0] = 127.0f;
        }
        if (kind == 2) std::fill(x.begin(), x.end(), 0.0f);
        for (int32_t group : {0, 8, 24, 32, 128})
          for (bool shifted : {false, true}) {
            SCOPED_TRACE(testing::Message() << kt->name << " k " << k << " kind " << kind << " group " << group
                                            << (shifted ? " shifted" : ""));
            const int64_t ld = cpu::quant_act_stride(k, group);
            const int64_t groups = group > 0 ? (k + group - 1) / group : 0;
            float amax = 0.0f;
            for (float v : x) amax = std::max(amax, std::fabs(v));
            const float inv = int8_row_inv(amax);
            std::vector<uint8_t> want(size_t(ld), 0), got(size_t(ld), 0xCD);
            std::vector<int32_t> wsum(size_t(groups), 0), gsum(size_t(groups), -1);
            for (int64_t j = 0; j < k; ++j) {
              const int v = std::min(127, std::max(-127, static_cast<int>(std::nearbyint(x[size_t(j)] * inv))));
              want[size_t(j)] = static_cast<uint8_t>(v + (shifted ? 128 : 0));
              if (group > 0) wsum[size_t(j / group)] += static_cast<int8_t>(want[size_t(j)]);
            }
            const float got_amax = kt->quantize_row_int8(x.data(), k, ld, shifted, group, got.data(), gsum.data());
            ASSERT_EQ(got_amax, amax);
            ASSERT_EQ(got, want);
            ASSERT_EQ(gsum, wsum);
          }
      }
  }
  if (!tested) GTEST_SKIP() << "no int8-activation kernels on this CPU";
}

// Row i computed alone equals row i inside batches of 2 .. 9, 16, 17 and 33 rows, bit for bit (every
// int4 row tile; n = 300 ends in a partial super-panel).
TEST(LinearQuant, BatchInvariant) {
  int tested = 0;
  for (MatmulPrecision prec : {MatmulPrecision::Highest, MatmulPrecision::High, MatmulPrecision::Medium})
    for (auto [f, g] : {std::pair<WeightFormat, int32_t>{WeightFormat::Int8, 0}, {WeightFormat::Int4, 64}, {WeightFormat::Fp8, 128}}) {
      if (!runs_quant(prec, f)) continue;
      ++tested;
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
  if (!tested) GTEST_SKIP() << "no quantized kernels on this CPU";
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
