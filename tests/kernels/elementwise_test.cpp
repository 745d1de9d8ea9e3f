// rms_norm, rope, silu_mul, embedding, add_inplace, kv_store: every optimised ISA vs the scalar
// reference. Tolerances (per element, u = 2^-24):
//   rms_norm  |Δ| <= (ceil(d / 8) + 16) u |y_ref|          (sum of squares in f32 lanes, rsqrt, 2 muls)
//   rope      |Δ| <= 8 u (|x1| + |x2|)                    (f32 cos/sin table + 2 muls + 1 add)
//   silu_mul  |Δ| <= 16 u |y_ref| + 1e-30                  (exp to ~2 ulp, add, div, mul)
//   embedding, add_inplace, kv_store: bitwise equal (pure conversions / one add).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernel_test_util.h"

namespace pypto::test {
namespace {

TEST(RmsNorm, MatchesReference) {
  auto ref = make_reference_backend();
  for (const auto& c : optimised_cases()) {
    auto opt = make_case(c);
    for (auto [m, d] : {std::pair<int64_t, int64_t>{1, 1}, {1, 7}, {3, 128}, {37, 1025}, {5, 3000}, {64, 1024}}) {
      auto x = random_f32(m * d, 31, -3, 3);
      auto g = random_f32(d, 32, 0.5, 1.5);
      std::vector<float> y(m * d), yr(m * d);
      opt->rms_norm(x.data(), g.data(), m, d, 1e-6f, y.data());
      ref->rms_norm(x.data(), g.data(), m, d, 1e-6f, yr.data());
      for (int64_t i = 0; i < m * d; ++i)
        ASSERT_LE(std::fabs(y[i] - yr[i]), (double((d + 7) / 8) + 16) * kU32 * std::fabs(yr[i]) + 1e-30)
            << c.label << " m=" << m << " d=" << d << " i=" << i;
      // In place (y aliases x) gives the same bits.
      std::vector<float> xi = x;
      opt->rms_norm(xi.data(), g.data(), m, d, 1e-6f, xi.data());
      ASSERT_TRUE(bitwise_equal(xi.data(), y.data(), m * d)) << c.label;
    }
  }
}

// Plain RoPE and YaRN (factor 4 over an original context of 64, so the ramp between the
// extrapolated and interpolated pairs falls inside every head_dim below; attention factor 1.139).
TEST(Rope, MatchesReference) {
  auto ref = make_reference_backend();
  RopeSpec yarn = RopeSpec::plain(1e6);
  yarn.yarn_factor = 4;
  yarn.yarn_original_max_positions = 64;
  yarn.attention_factor = 0.1 * std::log(4.0) + 1;
  for (const auto& c : optimised_cases()) {
    auto opt = make_case(c);
    for (const RopeSpec& rope : {RopeSpec::plain(1e6), yarn})
      for (auto [n_heads, hd] : {std::pair<int32_t, int32_t>{1, 2}, {3, 6}, {16, 128}, {2, 40}, {4, 64}}) {
        const int64_t m = 37;
        std::vector<int32_t> pos(m);
        for (int64_t i = 0; i < m; ++i) pos[i] = static_cast<int32_t>((i * 977) % 9000);  // beyond 4096 too
        auto x = random_f32(m * n_heads * hd, 41, -2, 2);
        auto y = x, yr = x;
        opt->rope(y.data(), pos.data(), m, n_heads, hd, rope);
        ref->rope(yr.data(), pos.data(), m, n_heads, hd, rope);
        const int32_t half = hd / 2;
        for (int64_t r = 0; r < m * n_heads; ++r)
          for (int32_t j = 0; j < hd; ++j) {
            double mag = (std::fabs(x[r * hd + j % half]) + std::fabs(x[r * hd + j % half + half])) * rope.attention_factor;
            ASSERT_LE(std::fabs(y[r * hd + j] - yr[r * hd + j]), 8 * kU32 * mag + 1e-30)
                << c.label << " hd=" << hd << " row " << r << " j " << j << " yarn " << rope.yarn_factor;
          }
      }
  }
}

// YaRN's inverse frequencies against values worked out by hand from its definition
// (kernels/rope_spec.h): head_dim 8, theta 10000, factor 4, original 64, betas 32 / 1:
// correction dims 8 ln(64 / 2π·32) / 2 ln 1e4 = -0.4972 -> floor -1 -> 0 and
// 8 ln(64 / 2π) / 2 ln 1e4 = 1.0081 -> ceil 2: ramp j / 2 for j = 0..3, clamped.
TEST(Rope, YarnInverseFrequencies) {
  RopeSpec s = RopeSpec::plain(10000);
  s.yarn_factor = 4;
  s.yarn_original_max_positions = 64;
  const std::vector<double> f = rope_inv_freq(s, 8);
  ASSERT_EQ(f.size(), 4u);
  const double e[4] = {1.0, 0.1, 0.01, 0.001};  // 10000^(-2j/8)
  const double ramp[4] = {0.0, 0.5, 1.0, 1.0};
  for (int j = 0; j < 4; ++j)
    EXPECT_NEAR(f[j], e[j] / 4 * ramp[j] + e[j] * (1 - ramp[j]), 1e-15 * e[j]) << "pair " << j;
  // Plain RoPE is untouched by the YaRN fields when the factor is 0.
  const std::vector<double> p = rope_inv_freq(RopeSpec::plain(10000), 8);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(p[j], e[j], 1e-15 * e[j]);
}

TEST(SiluMul, MatchesReference) {
  auto ref = make_reference_backend();
  for (const auto& c : optimised_cases()) {
    auto opt = make_case(c);
    for (auto [m, inter] : {std::pair<int64_t, int64_t>{1, 1}, {1, 3072}, {3, 17}, {37, 100}}) {
      auto gu = random_f32(m * 2 * inter, 51, -20, 20);
      gu[0] = -100.0f;  // e^100 overflows nowhere: silu -> -0
      if (gu.size() > 1) gu[1] = 95.0f;
      std::vector<float> y(m * inter), yr(m * inter);
      opt->silu_mul(gu.data(), m, inter, y.data());
      ref->silu_mul(gu.data(), m, inter, yr.data());
      for (int64_t i = 0; i < m * inter; ++i)
        ASSERT_LE(std::fabs(y[i] - yr[i]), 16 * kU32 * std::fabs(yr[i]) + 1e-30)
            << c.label << " i=" << i << " gate " << gu[(i / inter) * 2 * inter + i % inter];
    }
  }
}

TEST(Embedding, MatchesReferenceBitwise) {
  auto ref = make_reference_backend();
  const int64_t vocab = 50, d = 37;
  std::vector<int32_t> ids = {0, 49, 7, 7, 23};
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) {
    auto table = encode(random_f32(vocab * d, 61), dt);
    std::vector<float> yr(ids.size() * d);
    ref->embedding(ids.data(), ids.size(), table.data(), dt, d, yr.data());
    for (const auto& c : optimised_cases()) {
      auto opt = make_case(c);
      std::vector<float> y(ids.size() * d);
      opt->embedding(ids.data(), ids.size(), table.data(), dt, d, y.data());
      ASSERT_TRUE(bitwise_equal(y.data(), yr.data(), y.size())) << c.label << " " << dtype_name(dt);
    }
  }
}

TEST(AddInplace, MatchesReferenceBitwise) {
  auto ref = make_reference_backend();
  for (int64_t n : {1, 15, 16, 17, 100000}) {
    auto x = random_f32(n, 71), y0 = random_f32(n, 72);
    auto yr = y0;
    ref->add_inplace(yr.data(), x.data(), n);
    for (const auto& c : optimised_cases()) {
      auto y = y0;
      make_case(c)->add_inplace(y.data(), x.data(), n);
      ASSERT_TRUE(bitwise_equal(y.data(), yr.data(), n)) << c.label << " n=" << n;
    }
  }
}

// Every KV dtype; the 8-bit ones (kernels/kv_quant.h) with their per-row scales, compared as bits
// (a row holding the NaN gets a NaN scale).
TEST(KvStore, MatchesReferenceBitwise) {
  auto ref = make_reference_backend();
  for (DType dt : {DType::BF16, DType::F32, DType::I8, DType::F8_E4M3}) {
    for (auto [n_kv, hd] : {std::pair<int32_t, int32_t>{8, 128}, {1, 5}, {3, 24}}) {
      const int64_t num_blocks = 6, bs = 4, row = int64_t(n_kv) * hd;
      const int64_t m = 9;
      auto k = random_f32(m * row, 81), v = random_f32(m * row, 82);
      k[0] = 1e-40f;  // a denormal: bf16 rounding must keep it like f32_to_bf16 does
      k[1] = NAN;
      std::vector<int64_t> slots = {0, 5, 23, 4, -1, 11, 12, 3, 16};
      const size_t bytes = num_blocks * bs * row * dtype_size(dt);
      const bool q8 = dt == DType::I8 || dt == DType::F8_E4M3;
      const size_t nscale = q8 ? size_t(num_blocks * bs * n_kv) : 0;
      std::vector<uint8_t> kr(bytes, 0xAB), vr(bytes, 0xAB);
      std::vector<float> ksr(nscale, -7.0f), vsr(nscale, -7.0f);
      KvCacheLayer cr{kr.data(), vr.data(), dt, num_blocks, int32_t(bs), n_kv, hd, q8 ? ksr.data() : nullptr,
                      q8 ? vsr.data() : nullptr};
      ref->kv_store(k.data(), v.data(), slots.data(), m, cr);
      if (q8) EXPECT_NE(ksr[size_t(cr.scale_index(1, 0, 1))], -7.0f);  // slot 5: block 1, offset 1
      for (const auto& c : optimised_cases()) {
        std::vector<uint8_t> ko(bytes, 0xAB), vo(bytes, 0xAB);
        std::vector<float> kso(nscale, -7.0f), vso(nscale, -7.0f);
        KvCacheLayer co{ko.data(), vo.data(), dt, num_blocks, int32_t(bs), n_kv, hd, q8 ? kso.data() : nullptr,
                        q8 ? vso.data() : nullptr};
        make_case(c)->kv_store(k.data(), v.data(), slots.data(), m, co);
        ASSERT_EQ(ko, kr) << c.label << " " << dtype_name(dt);
        ASSERT_EQ(vo, vr) << c.label << " " << dtype_name(dt);
        ASSERT_EQ(0, std::memcmp(kso.data(), ksr.data(), nscale * 4)) << c.label << " " << dtype_name(dt);
        ASSERT_EQ(0, std::memcmp(vso.data(), vsr.data(), nscale * 4)) << c.label << " " << dtype_name(dt);
      }
    }
  }
}

}  // namespace
}  // namespace pypto::test
