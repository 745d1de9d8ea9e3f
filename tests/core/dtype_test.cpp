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
  EXPECT_FALSE(dtype_parse("F8_E4M3", &t));
}

TEST(Memory, ParsesByteSizes) {
  EXPECT_EQ(parse_byte_size("--kv-cache-memory", "4GiB"), 4ull << 30);
  EXPECT_EQ(parse_byte_size("--kv-cache-memory", "512MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("--kv-cache-memory", "2GB"), 2000000000ull);
  EXPECT_THROW(parse_byte_size("--kv-cache-memory", "lots"), Error);
  EXPECT_THROW(parse_byte_size("--kv-cache-memory", "4XB"), Error);
}
