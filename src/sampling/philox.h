#pragma once
// Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random
// numbers: as easy as 1, 2, 3", SC'11). A draw is a pure function of (key, counter), so a
// request's n-th draw depends only on its seed and n — never on which other requests share the
// batch, on thread scheduling, or on whether the request was preempted and recomputed.
#include <array>
#include <cstdint>

namespace pypto {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Ten rounds of Philox4x32 on one counter block.
PhiloxCounter philox4x32_10(PhiloxCounter ctr, PhiloxKey key);

// A uniform double in [0, 1) with 53 random bits: draw number `draw` of stream `seed`.
double philox_uniform(uint64_t seed, uint64_t draw);

}  // namespace pypto
