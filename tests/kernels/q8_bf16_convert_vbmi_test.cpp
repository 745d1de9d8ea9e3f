// The two int8 → bf16 conversions of the W8A16 kernels (kernels/cpu/linear_quant_bf16_q8.h): every
// int8 value, -128 included, comes out as its exact bf16 in the lane its column's pair names
// (Conv::pair0_lanes()), for the widening conversion and the VBMI byte look-ups alike. The kernels'
// end-to-end checks (linear_quant_test.cpp) run only the conversion this CPU picks, on weights in
// [-127, 127]. Compiled with the VBMI flags, so both skip on CPUs without AVX-512 BF16 + VBMI
// (where the widening conversion is the one the kernels run, and linear_quant_test.cpp covers it).
#include "kernels/cpu/linear_quant_bf16_q8.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "core/cpu_features.h"

namespace pypto::cpu::qbf16 {
namespace {

// bf16 bits of the integer q; f32(q) has no bits below the bf16 ones for |q| ≤ 128.
uint16_t exact_bf16(int q) {
  const uint32_t b = std::bit_cast<uint32_t>(static_cast<float>(q));
  EXPECT_EQ(b & 0xFFFFu, 0u);
  return static_cast<uint16_t>(b >> 16);
}

// Four 64-byte quad blocks (16 columns × 4 inputs, byte 4c + s of each 16-byte row 4 columns
// apart: byte 16j + 4c' + s is column 4j + c', input s) holding all 256 int8 values once.
template <class Conv>
void check_every_int8(const char* name) {
  SCOPED_TRACE(name);
  const Conv conv;
  alignas(64) int32_t lane0[16];
  _mm512_store_si512(lane0, Conv::pair0_lanes());
  for (int block = 0; block < 4; ++block) {
    alignas(64) uint8_t b[64];
    // Values spread over the block so neighbours differ in sign and magnitude.
    for (int i = 0; i < 64; ++i) b[i] = static_cast<uint8_t>((block * 64 + i * 37) & 0xFF);
    __m512bh w0, w1;
    conv.convert(b, w0, w1);
    alignas(64) uint16_t out[64];
    _mm512_store_si512(out, (__m512i)w0);
    _mm512_store_si512(out + 32, (__m512i)w1);
    for (int col = 0; col < 16; ++col)
      for (int s = 0; s < 4; ++s) {
        const int q = static_cast<int8_t>(b[16 * (col / 4) + 4 * (col % 4) + s]);
        const int lane = lane0[col] + s / 2;  // pair s / 2 of the column; input s % 2 of the pair
        ASSERT_EQ(out[2 * lane + s % 2], exact_bf16(q)) << "q " << q << " column " << col << " input " << s;
      }
  }
}

TEST(Q8Bf16Conversion, WideningGivesEveryInt8Exactly) {
  if (cpu_isa() != Isa::Avx512 || !cpu_features().avx512_vbmi) GTEST_SKIP() << "CPU without AVX-512 BF16 + VBMI";
  check_every_int8<Q8Widen>("widen");
}

TEST(Q8Bf16Conversion, ByteLookupsGiveEveryInt8Exactly) {
  if (cpu_isa() != Isa::Avx512 || !cpu_features().avx512_vbmi) GTEST_SKIP() << "CPU without AVX-512 BF16 + VBMI";
  check_every_int8<Q8Lookup>("lookup");
}

}  // namespace
}  // namespace pypto::cpu::qbf16
