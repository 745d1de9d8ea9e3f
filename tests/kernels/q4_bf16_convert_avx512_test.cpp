// The nibble → bf16 conversion of the W4A16 kernels (kernels/cpu/linear_quant_bf16_q4.h): every
// nibble value u, in the low and in the high nibble of every byte of a lane, comes out as the exact
// bf16 of 16 + u in the 16-bit word the tiles pair with x: lane c of w02 / w46 / w13 / w57 holds
// column c's inputs (0, 2) / (4, 6) / (1, 3) / (5, 7). The kernels' end-to-end checks
// (linear_quant_test.cpp) see random weights against a tolerance; this checks the words exactly.
// Compiled with the AVX-512 flags, so it skips on CPUs without AVX-512 BF16.
#include "kernels/cpu/linear_quant_bf16_q4.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>

#include "core/cpu_features.h"

namespace pypto::cpu::qbf16 {
namespace {

// bf16 bits of 16 + u; f32(16 + u) has no bits below the bf16 ones for u ≤ 15.
uint16_t exact_bf16_16_plus(int u) {
  const uint32_t b = std::bit_cast<uint32_t>(static_cast<float>(16 + u));
  EXPECT_EQ(b & 0xFFFFu, 0u);
  return static_cast<uint16_t>(b >> 16);
}

// 16 chunks of 64 bytes (16 columns × 8 nibbles; byte 4c + s: input s low, input 4 + s high).
// Nibble (column c, input k) of chunk j is (c + 5k + 3j) mod 16: at every input position the 16
// columns take all 16 values, and over the chunks each column meets each value at each position.
TEST(Q4Bf16Conversion, ShiftsGiveEveryNibbleExactly) {
  if (cpu_isa() != Isa::Avx512) GTEST_SKIP() << "CPU without AVX-512 BF16";
  static constexpr int kInput[4][2] = {{0, 2}, {4, 6}, {1, 3}, {5, 7}};  // w02, w46, w13, w57
  for (int chunk = 0; chunk < 16; ++chunk) {
    auto nibble = [&](int c, int k) { return (c + 5 * k + 3 * chunk) & 15; };
    alignas(64) uint8_t b[64];
    for (int c = 0; c < 16; ++c)
      for (int s = 0; s < 4; ++s) b[4 * c + s] = static_cast<uint8_t>(nibble(c, s) | nibble(c, 4 + s) << 4);
    const Q4Words w = q4_to_bf16(b);
    alignas(64) uint16_t out[4][32];
    _mm512_store_si512(out[0], (__m512i)w.w02);
    _mm512_store_si512(out[1], (__m512i)w.w46);
    _mm512_store_si512(out[2], (__m512i)w.w13);
    _mm512_store_si512(out[3], (__m512i)w.w57);
    for (int v = 0; v < 4; ++v)
      for (int c = 0; c < 16; ++c)
        for (int h = 0; h < 2; ++h) {
          const int k = kInput[v][h], u = nibble(c, k);
          ASSERT_EQ(out[v][2 * c + h], exact_bf16_16_plus(u)) << "u " << u << " column " << c << " input " << k;
        }
  }
}

}  // namespace
}  // namespace pypto::cpu::qbf16
