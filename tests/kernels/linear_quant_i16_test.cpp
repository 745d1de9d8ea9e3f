// Int16 activations (QuantActivations::Int16: --matmul-precision high for int8 / int4 weights on
// CPUs without a bf16 dot product, AVX2): the row quantizer against its scalar definition
// (backend.h int16_block_inv), the integer sums at the ends of their range, and the error of the
// whole product against exact f32 activations, with and without outlier channels. The kernels
// against the scalar reference on awkward shapes and their batch invariance are in
// linear_quant_test.cpp (MatchesReferenceWithInt16Activations, BatchInvariant).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <vector>

#include "core/cpu_features.h"
#include "kernels/backend.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_panels.h"
#include "kernel_test_util.h"
#include "quant_test_util.h"

namespace pypto::test {
namespace {

const cpu::KernelTable* int16_table() {
  const cpu::KernelTable* kt = cpu::kernel_table(cpu_isa());
  return kt && kt->linear_cols_q8_i16 ? kt : nullptr;
}

// Where input j of a row lies in the kernels' order: per 8 inputs k 0,2,4,6,1,3,5,7 (Int4), per 4
// inputs k 0,2,1,3 (Int8).
int64_t kernel_slot(int64_t j, bool int4_order) {
  if (int4_order) {
    const int64_t s = j % 8;
    return j - s + (s % 2 == 0 ? s / 2 : 4 + s / 2);
  }
  const int64_t s = j % 4;
  return j - s + (s == 0 ? 0 : s == 1 ? 2 : s == 2 ? 1 : 3);
}

// quantize_row_int16 against its definition: per block amax, inv = 32767 / amax, xq =
// clamp(round-even(x · inv), ±32767) in kernel order, zeros to ld, the block scales and sums,
// exactly. Lengths off the vector width (Int8 weights take any k), exact ties (amax 32767: inv 1,
// x = j + 0.5), a zero block, every block size int16_act_block gives.
TEST(LinearQuantI16, QuantizeRowMatchesScalar) {
  const cpu::KernelTable* kt = int16_table();
  if (!kt) GTEST_SKIP() << "no int16-activation kernels here (AVX2 only; high runs bf16x2 with AVX512_BF16)";
  for (int64_t k : {8, 16, 24, 100, 1027, 1024})
    for (int kind = 0; kind < 3; ++kind)
      for (int32_t block : {8, 16, 32, 64})
        for (bool int4 : {false, true}) {
          if (int4 && k % 8 != 0) continue;  // Int4 weights have k % 8 == 0
          SCOPED_TRACE(testing::Message() << "k " << k << " kind " << kind << " block " << block << (int4 ? " int4" : " int8"));
          std::vector<float> x = random_f32(size_t(k), uint32_t(k * 7 + kind), -3.0f, 3.0f);
          if (kind == 1) {  // every block's amax 32767: inv 1, ties at j + 0.5
            for (int64_t j = 0; j < k; ++j) x[size_t(j)] = float((j * 37) % 2001 - 1000) + 0.5f;
            for (int64_t j = 0; j < k; j += block) x[size_t(j)] = (j / block) % 2 ? -32767.0f : 32767.0f;
          }
          if (kind == 2)  // the second block all zeros
            for (int64_t j = block; j < std::min<int64_t>(k, 2 * block); ++j) x[size_t(j)] = 0.0f;
          const int64_t ld = cpu::quant_act_stride(k, int4 ? block : 0), blocks = (k + block - 1) / block;
          std::vector<int16_t> want(size_t(ld), 0), got(size_t(ld), int16_t(0x5A5A));
          std::vector<float> wscale(static_cast<size_t>(blocks)), gscale(static_cast<size_t>(blocks), -1.0f);
          std::vector<int32_t> wsum(static_cast<size_t>(blocks), 0), gsum(static_cast<size_t>(blocks), -1);
          for (int64_t b = 0; b < blocks; ++b) {
            float amax = 0.0f;
            for (int64_t j = b * block; j < std::min(k, (b + 1) * block); ++j) amax = std::max(amax, std::fabs(x[size_t(j)]));
            const float inv = int16_block_inv(amax);
            wscale[size_t(b)] = int16_block_scale(amax);
            for (int64_t j = b * block; j < std::min(k, (b + 1) * block); ++j) {
              const int v = std::min(32767, std::max(-32767, static_cast<int>(std::nearbyint(x[size_t(j)] * inv))));
              want[size_t(kernel_slot(j, int4))] = static_cast<int16_t>(v);
              wsum[size_t(b)] += v;
            }
          }
          kt->quantize_row_int16(x.data(), k, ld, int4, block, got.data(), gscale.data(), gsum.data());
          ASSERT_EQ(got, want);
          ASSERT_EQ(gscale, wscale);
          ASSERT_EQ(gsum, wsum);
        }
}

// Int8 weights at the ends of s8 (-128 included) against x at ±amax of every block (xq = ±32767),
// signs chosen so that all products of a row share one sign: each block's s32 sum reaches 64 · 128
// · 32767 = 2^28 in magnitude, and a lost sign (the widening of -128) or a wrapped sum would be far
// outside the epilogue's few roundings. Int4 the same with nibbles 15 and zero points 0.
TEST(LinearQuantI16, ExactAtTheEnds) {
  if (!int16_table()) GTEST_SKIP() << "no int16-activation kernels here (AVX2 only)";
  const int64_t n = 40, k = 264;
  std::vector<float> x(size_t(3 * k));
  for (int64_t j = 0; j < k; ++j) {
    x[size_t(j)] = (j % 3 == 0) ? -1.0f : 1.0f;         // row 0: xq = ±32767
    x[size_t(k + j)] = (j % 2 == 0) ? 1.0f : -1.0f;     // row 1
    x[size_t(2 * k + j)] = float(j % 7) / 6.0f - 0.5f;  // row 2: mixed
  }
  for (WeightFormat f : {WeightFormat::Int8, WeightFormat::Int4}) {
    RandomQuant rq = random_quant(f, n, k, 64, 3);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < k; ++j) {
        const bool neg = (x[size_t(j)] < 0) != (r % 2 == 1);
        if (f == WeightFormat::Int8) {
          rq.q8[size_t(r * k + j)] = static_cast<int8_t>(neg ? -128 : 127);
        } else {
          rq.q4[size_t(r * k + j)] = 15;
        }
      }
    if (f == WeightFormat::Int4) std::fill(rq.zero.begin(), rq.zero.end(), uint8_t(0));
    for (int threads : {1, 2}) {
      auto ref = make_reference_backend(QuantActivations::Int16);
      auto opt = make_cpu_backend(threads, {}, MatmulPrecision::High);
      ASSERT_EQ(opt->quant_activations(), QuantActivations::Int16);
      Staged sr = stage(*ref, rq.w), so = stage(*opt, rq.w);
      // The bound: a few f32 roundings of Σ_k |x w| (the blocks are folded in f32, so a row whose
      // blocks cancel, row 1, is off zero by their roundings).
      std::vector<float> wrow(static_cast<size_t>(k));
      std::vector<double> wmax(static_cast<size_t>(n), 0.0);
      for (int32_t r = 0; r < int32_t(n); ++r) {
        ref->weight_rows(&r, 1, sr.lw, wrow.data());
        for (float v : wrow) wmax[size_t(r)] = std::max(wmax[size_t(r)], double(std::fabs(v)));
      }
      for (int64_t m : {1, 3}) {
        std::vector<float> yr(size_t(m * n)), yo(yr.size(), NAN);
        ref->linear(x.data(), m, sr.lw, nullptr, yr.data());
        opt->linear(x.data(), m, so.lw, nullptr, yo.data());
        for (int64_t i = 0; i < m; ++i) {
          double sx = 0;
          for (int64_t j = 0; j < k; ++j) sx += std::fabs(x[size_t(i * k + j)]);
          for (int64_t c = 0; c < n; ++c) {
            const size_t o = size_t(i * n + c);
            ASSERT_LE(std::fabs(yo[o] - yr[o]), 16 * kU32 * sx * wmax[size_t(c)])
                << weight_format_name(f) << " m " << m << " row " << i << " column " << c << ": " << yo[o] << " vs " << yr[o];
          }
        }
      }
    }
  }
}

// The int16 result against the exact (f32-activation) reference, k = 3072: plain x, and x whose 4
// channels are 64× the rest (as Qwen3's outlier channels, which a per-row int8 step cannot
// resolve). Each block of 64 inputs has its own step, so an outlier costs only its block; the
// bounds are ~3× what was measured (printed) and below what one step per row gives with outliers
// (3–4e-4 of max|y| in a numpy simulation of this setting).
TEST(LinearQuantI16, StaysNearExact) {
  if (!int16_table()) GTEST_SKIP() << "no int16-activation kernels here (AVX2 only)";
  for (auto [f, g] : {std::pair<WeightFormat, int32_t>{WeightFormat::Int8, 0}, {WeightFormat::Int4, 128}})
    for (float outlier : {1.0f, 64.0f}) {
      const double err = high_error_vs_exact(f, g, outlier);
      EXPECT_LE(err, outlier > 1.0f ? 2.5e-4 : 6e-5) << weight_format_name(f) << " outliers x" << outlier;
      std::printf("[ measured ] %s int16 high vs exact, outliers x%g: max|dy| / max|y| = %.2e (k 3072)\n",
                  weight_format_name(f), double(outlier), err);
    }
}

}  // namespace
}  // namespace pypto::test
