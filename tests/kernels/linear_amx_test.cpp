// linear on AMX-BF16 tiles (kernels/cpu/linear_amx_impl.h, CpuLinearKernel::Amx) against the
// scalar reference, on awkward shapes (m = 1, 7, 16, 17, 512; k and n not multiples of a tile),
// at medium (x as one bf16) and high (x ≈ hi + lo), and bitwise batch invariance across m, row
// chunks and thread counts. Skips (saying why) where the CPU or the OS gives no AMX.
//
// Tolerance: the reference (double accumulation) is fed the x the kernel sees (bf16(x), or
// hi + lo, exact in f32), so only the accumulation differs. Per output the tiles add, in k order,
// one sum of 16 pairs per 32 k per part into one f32 accumulator; TDPBF16PS's internal rounding
// is not specified, so the bound allows two roundings per pair and part, as for the bf16-dot
// kernel: (2k · parts + 8) · 2^-24 · Σ|x w| + 2^-24 |bias|.
#include <gtest/gtest.h>

#include <tuple>

#include "core/memory.h"
#include "kernels/cpu/kernel_table.h"
#include "kernel_test_util.h"

namespace pypto::test {
namespace {

struct AmxCase {
  int64_t m, n, k;
};

std::unique_ptr<Backend> make_amx(bool split, int threads) {
  CpuBackendOptions o;
  o.bf16_activations = !split;
  o.split_bf16_activations = split;
  o.linear_kernel = CpuLinearKernel::Amx;
  return make_cpu_backend_for_isa(Isa::Avx512, threads, {}, o);
}

// x as the kernel sees it: bf16(x), or hi + lo with lo = bf16(x - hi).
std::vector<float> as_kernel_sees(const std::vector<float>& x, bool split) {
  auto xr = x;
  for (auto& v : xr) {
    float hi = bf16_to_f32(f32_to_bf16(v));
    v = split ? hi + bf16_to_f32(f32_to_bf16(v - hi)) : hi;
  }
  return xr;
}

struct Packed {
  AlignedBuffer data;
  LinearWeight w;
};
Packed pack(Backend& be, const std::vector<uint8_t>& wb, int64_t n, int64_t k) {
  Packed p{AlignedBuffer(be.packed_weight_bytes(DType::BF16, n, k)), {}};
  be.pack_weight(wb.data(), DType::BF16, n, k, p.data.data());
  p.w = LinearWeight{p.data.data(), DType::BF16, n, k};
  return p;
}

TEST(LinearAmx, MatchesRoundedReferenceOnAwkwardShapes) {
  if (!amx_usable()) GTEST_SKIP() << "AMX not usable on this machine (" << amx_status() << ")";
  auto ref = make_reference_backend();
  const AmxCase cases[] = {{1, 37, 1},   {1, 1, 17},     {7, 19, 33},   {16, 64, 1024}, {17, 50, 100},
                           {7, 200, 129}, {17, 33, 3072}, {512, 70, 96}, {512, 130, 40}, {33, 16, 64},
                           {100, 600, 530}};  // the last: several column groups and k blocks of the GEMM path
  uint32_t seed = 11;
  for (bool split : {false, true})
    for (int threads : {1, 2, 3}) {
      auto be = make_amx(split, threads);
      ASSERT_FALSE(be->weight_layout_is_plain(DType::BF16));
      for (const auto& c : cases) {
        SCOPED_TRACE(testing::Message() << be->name() << " x" << threads << " m=" << c.m << " n=" << c.n
                                        << " k=" << c.k);
        auto x = random_f32(c.m * c.k, seed);
        auto xr = as_kernel_sees(x, split);
        auto wb = encode(random_f32(c.n * c.k, seed + 1), DType::BF16);
        auto bias = random_f32(c.n, seed + 2);
        const float* b = seed % 2 ? bias.data() : nullptr;
        ++seed;
        Packed p = pack(*be, wb, c.n, c.k);
        LinearWeight w_plain{wb.data(), DType::BF16, c.n, c.k};
        std::vector<float> y(c.m * c.n, NAN), yr(c.m * c.n);
        be->linear(x.data(), c.m, p.w, b, y.data());
        ref->linear(xr.data(), c.m, w_plain, b, yr.data());
        for (int64_t i = 0; i < c.m; ++i)
          for (int64_t n = 0; n < c.n; ++n) {
            double mag = 0;
            for (int64_t kk = 0; kk < c.k; ++kk)
              mag += std::fabs(double(xr[i * c.k + kk]) * load_as_f32(wb.data(), DType::BF16, n * c.k + kk));
            const double tol =
                (2.0 * double(c.k) * (split ? 2 : 1) + 8) * kU32 * mag + kU32 * (b ? std::fabs(b[n]) : 0) + 1e-30;
            ASSERT_LE(std::fabs(double(y[i * c.n + n]) - yr[i * c.n + n]), tol)
                << "at [" << i << "," << n << "]: " << y[i * c.n + n] << " vs " << yr[i * c.n + n];
          }
      }
    }
}

// A row's result is bitwise the same alone, in a batch of 16 or 512, and in 7-row chunks, at any
// thread count: the property the engine's greedy outputs rely on (backend.h).
TEST(LinearAmx, BatchInvariantAcrossMChunksAndThreads) {
  if (!amx_usable()) GTEST_SKIP() << "AMX not usable on this machine (" << amx_status() << ")";
  // With a bias every output goes through the accumulator buffer; without one, whole tiles of
  // many-row calls are stored straight into y (linear_amx_impl.h direct_block): both must agree
  // with the one-row path. n = 100 leaves a partial tile, m = 505 a partial row block.
  for (auto [split, with_bias] : {std::pair{false, true}, {true, true}, {false, false}, {true, false}}) {
    SCOPED_TRACE(testing::Message() << "split=" << split << " bias=" << with_bias);
    const int64_t m = with_bias ? 512 : 505, n = 100, k = 1030;
    auto x = random_f32(m * k, 31);
    auto wb = encode(random_f32(n * k, 32), DType::BF16);
    auto bias_v = random_f32(n, 33);
    const float* bias = with_bias ? bias_v.data() : nullptr;
    auto be2 = make_amx(split, 2);
    Packed p = pack(*be2, wb, n, k);
    std::vector<float> full(m * n);
    be2->linear(x.data(), m, p.w, bias, full.data());
    for (int threads : {1, 3}) {
      auto be = make_amx(split, threads);
      std::vector<float> y(m * n);
      be->linear(x.data(), m, p.w, bias, y.data());
      ASSERT_TRUE(bitwise_equal(y.data(), full.data(), m * n)) << "split=" << split << " threads " << threads;
    }
    for (int64_t batch : {int64_t(1), int64_t(7), int64_t(16), int64_t(17)}) {
      std::vector<float> y(m * n);
      for (int64_t r0 = 0; r0 < m; r0 += batch) {
        const int64_t rows = std::min(batch, m - r0);
        be2->linear(x.data() + r0 * k, rows, p.w, bias, y.data() + r0 * n);
      }
      ASSERT_TRUE(bitwise_equal(y.data(), full.data(), m * n)) << "split=" << split << " in chunks of " << batch;
    }
  }
}

// x_row_to_amx_tiles (the AVX-512 conversion of one row of x into its line of the A tiles)
// against core/dtype.h's scalar rounding, bit for bit: hi = f32_to_bf16(x), lo = f32_to_bf16(x - hi),
// at line offsets 512 s within a part, zeros past k up to the whole tile, nothing else written.
TEST(LinearAmx, RowToTilesMatchesScalarRoundingBitwise) {
  // The CPU check comes first: building the AVX-512 table asserts that the CPU has AVX-512.
  if (cpu_isa() != Isa::Avx512) GTEST_SKIP() << "no AVX-512 on this machine (" << isa_name(cpu_isa()) << ")";
  const cpu::KernelTable* kt = cpu::kernel_table(Isa::Avx512);
  if (!kt || !kt->x_row_to_amx_tiles) GTEST_SKIP() << "the AVX-512 table has no x_row_to_amx_tiles";
  uint32_t seed = 51;
  for (int64_t k : {1, 15, 16, 17, 32, 33, 100, 1024}) {
    for (int parts : {1, 2}) {
      SCOPED_TRACE(testing::Message() << "k=" << k << " parts=" << parts);
      auto x = random_f32(k, seed++);
      if (k > 3) {  // values whose rounding is a tie, a NaN and a subnormal
        x[0] = bf16_to_f32(0x3f81) + std::ldexp(1.0f, -8);  // halfway between 0x3f81 and 0x3f82: to even
        x[1] = NAN;
        x[2] = std::ldexp(1.0f, -130);
      }
      const int64_t steps = (k + 31) / 32, part_elems = steps * 512 + 64;
      std::vector<uint16_t> out(static_cast<size_t>(2 * part_elems), 0xBEEF);
      kt->x_row_to_amx_tiles(x.data(), k, parts, out.data(), part_elems);
      for (int64_t j = 0; j < 2 * part_elems; ++j) {
        const int64_t p = j / part_elems, e = j % part_elems, s = e / 512, c = e % 512;
        const int64_t kk = 32 * s + c;
        uint16_t want = 0xBEEF;  // untouched: other lines of the tiles, or part 1 at parts == 1
        if (p < parts && c < 32 && s < steps) {
          const uint16_t hi = kk < k ? f32_to_bf16(x[kk]) : 0;
          want = p == 0 ? hi : kk < k ? f32_to_bf16(x[kk] - bf16_to_f32(hi)) : 0;
        }
        ASSERT_EQ(out[j], want) << "part " << p << " k index " << kk << " (line offset " << c << ")";
      }
    }
  }
}

// What the option costs: the error against the f64 product of the true f32 x (printed), which
// stays within the bf16-dot kernel's figures (linear_test.cpp): ~1e-6 of max|y| split, ~1e-3 not.
TEST(LinearAmx, ErrorAgainstTrueProduct) {
  if (!amx_usable()) GTEST_SKIP() << "AMX not usable on this machine (" << amx_status() << ")";
  auto ref = make_reference_backend();
  for (bool split : {false, true}) {
    auto be = make_amx(split, 2);
    for (int64_t k : {1024, 3072}) {
      const int64_t m = 16, n = 64;
      auto x = random_f32(m * k, 41);
      auto wb = encode(random_f32(n * k, 42), DType::BF16);
      Packed p = pack(*be, wb, n, k);
      LinearWeight w_plain{wb.data(), DType::BF16, n, k};
      std::vector<float> y(m * n), yt(m * n);
      be->linear(x.data(), m, p.w, nullptr, y.data());
      ref->linear(x.data(), m, w_plain, nullptr, yt.data());
      double worst = 0, scale = 0;
      for (int64_t i = 0; i < m * n; ++i) {
        worst = std::max(worst, std::fabs(double(y[i]) - yt[i]));
        scale = std::max(scale, std::fabs(double(yt[i])));
      }
      std::printf("  amx %s, k=%lld: max|y - y_f64| / max|y| = %.2e\n", split ? "bf16x2" : "bf16", (long long)k,
                  worst / scale);
      EXPECT_LT(worst / scale, split ? 2e-5 : 2e-2);
    }
  }
}

}  // namespace
}  // namespace pypto::test
