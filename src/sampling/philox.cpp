#include "sampling/philox.h"

namespace pypto {

namespace {

// Multipliers and Weyl key increments from the Philox paper (4x32 variant).
constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // golden ratio
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;  // sqrt(3) - 1
constexpr int kPhiloxRounds = 10;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = uint64_t(a) * uint64_t(b);
  *hi = uint32_t(p >> 32);
  *lo = uint32_t(p);
}

}  // namespace

PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  for (int r = 0; r < kPhiloxRounds; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kPhiloxM0, c[0], &hi0, &lo0);
    mulhilo(kPhiloxM1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
    k[0] += kPhiloxW0;
    k[1] += kPhiloxW1;
  }
  return c;
}

double philox_uniform(uint64_t seed, uint64_t draw) {
  const PhiloxCounter out = philox4x32_10({uint32_t(draw), uint32_t(draw >> 32), 0u, 0u},
                                          {uint32_t(seed), uint32_t(seed >> 32)});
  const uint64_t bits = (uint64_t(out[0]) << 32) | out[1];
  return double(bits >> 11) * 0x1.0p-53;
}

}  // namespace pypto
