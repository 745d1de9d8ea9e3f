#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/dtype.h"
#include "core/error.h"
#include "core/memory.h"

using namespace pypto;

TEST(DType, Bf16RoundsToNearestEven) {
  // 1 + 2^-8 is exactly halfway between two bf16 values (1 and 1 + 2^-7): ties go to even (1).
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // Slightly above halfway rounds up.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.0f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, F16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 0x10000; h++) {
    float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_f16(f), h) << "half 0x" << std::hex << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);               // rounds to infinity
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // halfway to the smallest: ties to even
}

TEST(DType, ParsesBothSpellings) {
  DType t;
  ASSERT_TRUE(dtype_parse("bfloat16", &t));
  EXPECT_EQ(t, DType::BF16);
  ASSERT_TRUE(dtype_parse("F16", &t));
  EXPECT_EQ(t, DType::F16);
  ASSERT_TRUE(dtype_parse("F8_E4M3", &t));
  EXPECT_EQ(t, DType::F8_E4M3);
  EXPECT_EQ(dtype_size(DType::F8_E4M3), 1u);
  EXPECT_STREQ(dtype_name(DType::F8_E4M3), "F8_E4M3");
  EXPECT_FALSE(dtype_parse("F8_E5M2", &t));
}

// The OCP E4M3FN value of a code from its definition, computed in double: (-1)^s · 2^(e-7) ·
// (1 + m/8) for e > 0, (-1)^s · 2^-6 · m/8 for e = 0, NaN for S.1111.111.
static double e4m3_by_definition(int code) {
  const int s = code >> 7, e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7) return NAN;
  const double mag = e == 0 ? std::ldexp(m / 8.0, -6) : std::ldexp(1.0 + m / 8.0, e - 7);
  return s ? -mag : mag;
}

TEST(DType, E4m3DecodesEveryCodeByDefinition) {
  for (int code = 0; code < 256; code++) {
    const double want = e4m3_by_definition(code);
    const float got = e4m3_to_f32(static_cast<uint8_t>(code));
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "code 0x" << std::hex << code;
      continue;
    }
    EXPECT_EQ(static_cast<double>(got), want) << "code 0x" << std::hex << code;
    EXPECT_EQ(std::signbit(got), code >= 0x80) << "code 0x" << std::hex << code;
  }
  // Anchors from the OCP FP8 specification's E4M3 table.
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.0f);                    // max normal S.1111.110
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.0f, -6));      // min normal S.0001.000
  EXPECT_EQ(e4m3_to_f32(0x07), 0.875f * std::ldexp(1.0f, -6));  // max subnormal S.0000.111
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.0f, -9));      // min subnormal S.0000.001
  EXPECT_EQ(e4m3_to_f32(0x38), 1.0f);
  EXPECT_EQ(e4m3_to_f32(0xc0), -2.0f);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
}

TEST(DType, E4m3RoundTripsEveryCode) {
  for (int code = 0; code < 256; code++) {
    const float f = e4m3_to_f32(static_cast<uint8_t>(code));
    const uint8_t back = f32_to_e4m3(f);
    if (std::isnan(f)) {
      EXPECT_EQ(back & 0x7f, 0x7f) << "code 0x" << std::hex << code;
      continue;
    }
    EXPECT_EQ(back, code) << "code 0x" << std::hex << code << " value " << f;
  }
}

TEST(DType, E4m3RoundsToNearestEvenAndSaturates) {
  // Every midpoint between neighbouring non-negative codes ties to the even code; a nudge either
  // side goes to the nearer one. Covers the subnormal/normal boundary (codes 7, 8) too.
  for (int code = 0; code < 0x7e; code++) {
    const double lo = e4m3_by_definition(code), hi = e4m3_by_definition(code + 1);
    const float mid = static_cast<float>((lo + hi) / 2);  // exact: 4 significant bits
    ASSERT_EQ(static_cast<double>(mid), (lo + hi) / 2);
    const int even = (code & 1) ? code + 1 : code;
    EXPECT_EQ(f32_to_e4m3(mid), even) << "midpoint of 0x" << std::hex << code;
    EXPECT_EQ(f32_to_e4m3(-mid), 0x80 | even) << "negative midpoint of 0x" << std::hex << code;
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 0.0f)), code);
    EXPECT_EQ(f32_to_e4m3(std::nextafter(mid, 1000.0f)), code + 1);
  }
  // Beyond 448 saturates (480 would be the NaN code), as does infinity; NaN stays NaN.
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(1e6f), 0x7e);
  EXPECT_EQ(f32_to_e4m3(-1e6f), 0xfe);
  EXPECT_EQ(f32_to_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(f32_to_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(f32_to_e4m3(NAN) & 0x7f, 0x7f);
  // Below half the smallest subnormal flushes to (signed) zero; exactly half ties to zero.
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(f32_to_e4m3(-std::ldexp(1.0f, -12)), 0x80);
  EXPECT_EQ(f32_to_e4m3(std::ldexp(1.0f, -149)), 0x00);  // f32 subnormal input
  EXPECT_EQ(load_as_f32("\x38\xc0", DType::F8_E4M3, 1), -2.0f);
}

TEST(Memory, ParsesByteSizes) {
  EXPECT_EQ(parse_byte_size("--kv-cache-memory", "4GiB"), 4ull << 30);
  EXPECT_EQ(parse_byte_size("--kv-cache-memory", "512MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("--kv-cache-memory", "2GB"), 2000000000ull);
  EXPECT_THROW(parse_byte_size("--kv-cache-memory", "lots"), Error);
  EXPECT_THROW(parse_byte_size("--kv-cache-memory", "4XB"), Error);
}
