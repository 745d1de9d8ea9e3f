// The 8-bit KV cache formats (kernels/kv_quant.h): the E4M3 conversions against the format's
// definition over all 256 codes, and the int8 / fp8 row round trips within their stated steps.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/kv_dtype.h"
#include "kernels/kv_quant.h"

namespace pypto::test {
namespace {

// E4M3FN from its definition (OCP 8-bit floating point, E4M3): sign s, exponent field e (4 bits,
// bias 7), mantissa m (3 bits); e = 15 with m = 7 is NaN (no infinities); e = 0 is subnormal
// (-1)^s · m/8 · 2^(1-7); otherwise (-1)^s · (1 + m/8) · 2^(e-7). Written with ldexp, independent
// of the bit manipulations in core/dtype.
double e4m3_definition(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? std::ldexp(m / 8.0, 1 - 7) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

TEST(KvQuant, E4m3DecodeMatchesDefinitionForAll256Codes) {
  int nan = 0;
  for (int c = 0; c < 256; ++c) {
    const double want = e4m3_definition(c);
    const float got = e4m3_to_f32(uint8_t(c));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
      ++nan;
      continue;
    }
    EXPECT_EQ(double(got), want) << "code " << c;
    EXPECT_EQ(std::signbit(got), bool(c & 0x80)) << "code " << c;  // -0 is 0x80
  }
  EXPECT_EQ(nan, 2);  // 0x7F and 0xFF
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));
}

// Encoding: each finite code round-trips; a value between two neighbouring codes goes to the
// nearer, a tie to the even code (even mantissa); beyond 448 saturates.
TEST(KvQuant, E4m3EncodeRoundsToNearestEvenAndSaturates) {
  std::vector<std::pair<double, int>> pos;  // non-negative finite codes by value
  for (int c = 0; c < 127; ++c) pos.push_back({e4m3_definition(c), c});
  for (auto [v, c] : pos) {
    EXPECT_EQ(f32_to_e4m3(float(v)), c) << v;
    if (c != 0) EXPECT_EQ(f32_to_e4m3(float(-v)), c | 0x80) << -v;
  }
  for (size_t i = 0; i + 1 < pos.size(); ++i) {
    const double a = pos[i].first, b = pos[i + 1].first, mid = (a + b) / 2;  // exact in f32
    const int even = (pos[i].second & 1) == 0 ? pos[i].second : pos[i + 1].second;
    EXPECT_EQ(f32_to_e4m3(float(mid)), even) << "tie " << mid;
    EXPECT_EQ(f32_to_e4m3(std::nextafter(float(mid), 0.0f)), pos[i].second) << "below " << mid;
    EXPECT_EQ(f32_to_e4m3(std::nextafter(float(mid), 1e9f)), pos[i + 1].second) << "above " << mid;
  }
  EXPECT_EQ(f32_to_e4m3(460.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(1e30f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(-INFINITY), 0xfe);
}

std::vector<float> random_row(int n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> x(static_cast<size_t>(n));
  for (float& v : x) v = d(rng);
  return x;
}

// int8: scale = amax / 127, the max element maps to ±127, every element within half a step.
TEST(KvQuant, Int8RowRoundTripWithinHalfAStep) {
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    const int n = seed % 3 == 0 ? 40 : 128;
    std::vector<float> x = random_row(n, seed, -3.0f, 3.0f);
    x[seed % n] = seed % 2 ? 7.5f : -7.5f;  // an outlier sets the step
    std::vector<int8_t> q(static_cast<size_t>(n));
    float scale = 0;
    kv_quantize_row(x.data(), n, DType::I8, q.data(), &scale);
    EXPECT_EQ(scale, 7.5f / 127.0f);
    EXPECT_EQ(std::abs(q[seed % n]), 127);
    for (int e = 0; e < n; ++e) {
      EXPECT_GE(q[e], -127);
      const float back = kv_dequant(q.data(), DType::I8, e, scale);
      EXPECT_EQ(back, float(q[e]) * scale);
      EXPECT_LE(std::fabs(back - x[e]), 0.5f * scale * (1 + 1e-5f)) << "seed " << seed << " e " << e;
    }
  }
}

// fp8: scale = amax / 448; a normal code is within 2^-4 of its value relative (3 mantissa bits,
// half an ulp), a subnormal one within half its step 2^-9 · scale.
TEST(KvQuant, Fp8RowRoundTripWithinHalfAnUlp) {
  for (uint32_t seed = 1; seed <= 50; ++seed) {
    const int n = 128;
    std::vector<float> x = random_row(n, seed, -2.0f, 2.0f);
    x[3] = 1e-4f;  // deep in the subnormal codes
    x[seed % n] = -5.0f;
    std::vector<uint8_t> q(static_cast<size_t>(n));
    float scale = 0;
    kv_quantize_row(x.data(), n, DType::F8_E4M3, q.data(), &scale);
    EXPECT_EQ(scale, 5.0f / 448.0f);
    EXPECT_EQ(q[seed % n], 0xfe);  // -448
    for (int e = 0; e < n; ++e) {
      const float back = kv_dequant(q.data(), DType::F8_E4M3, e, scale);
      const float y = std::fabs(x[e]) / scale;  // in code units
      const float tol = y >= std::ldexp(1.0f, -6) ? std::ldexp(std::fabs(x[e]), -4) : std::ldexp(scale, -10);
      EXPECT_LE(std::fabs(back - x[e]), tol * (1 + 1e-5f)) << "seed " << seed << " e " << e << " x " << x[e];
    }
  }
}

TEST(KvQuant, ZeroAndNonFiniteRows) {
  for (DType dt : {DType::I8, DType::F8_E4M3}) {
    std::vector<float> x(64, 0.0f);
    std::vector<uint8_t> q(64, 0xaa);
    float scale = -1;
    kv_quantize_row(x.data(), 64, dt, q.data(), &scale);
    EXPECT_EQ(scale, 0.0f);
    for (int e = 0; e < 64; ++e) EXPECT_EQ(kv_dequant(q.data(), dt, e, scale), 0.0f);
    x[5] = NAN;
    kv_quantize_row(x.data(), 64, dt, q.data(), &scale);
    EXPECT_TRUE(std::isnan(scale));
    EXPECT_TRUE(std::isnan(kv_dequant(q.data(), dt, 0, scale)));
  }
}

TEST(KvQuant, CacheDtypeNamesAndRowBytes) {
  EXPECT_EQ(parse_kv_cache_dtype("int8"), DType::I8);
  EXPECT_EQ(parse_kv_cache_dtype("fp8"), DType::F8_E4M3);
  EXPECT_EQ(parse_kv_cache_dtype("fp8_e4m3"), DType::F8_E4M3);
  EXPECT_EQ(parse_kv_cache_dtype("auto"), DType::BF16);
  EXPECT_EQ(parse_kv_cache_dtype("float32"), DType::F32);
  EXPECT_THROW(parse_kv_cache_dtype("fp8_e5m2"), Error);
  EXPECT_THROW(parse_kv_cache_dtype("int4"), Error);
  EXPECT_EQ(kv_row_bytes(DType::BF16, 128), 256);
  EXPECT_EQ(kv_row_bytes(DType::I8, 128), 132);  // codes + the f32 scale
  EXPECT_EQ(kv_row_bytes(DType::F8_E4M3, 64), 68);
}

}  // namespace
}  // namespace pypto::test
