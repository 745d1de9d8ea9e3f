#pragma once
// The gated delta rule's per-head recurrence (kernels/backend.h GdnSequence), as plain scalar code
// (the definition) and the AVX-512 kernel the CPU backend runs where the ISA has it. Both process
// one value head over all n tokens; heads are independent.
#include <cstdint>

#include "kernels/backend.h"

namespace pypto {

// Value head h of s over its n tokens: the definition, f32, sums in ascending index order.
void gdn_head_scalar(const GdnSequence& s, int32_t h);

namespace cpu {
// The same head with AVX-512 FMAs along d_v (16 lanes); d_v must be a multiple of 16. Differs
// from gdn_head_scalar only by FMA rounding (tests/kernels: within 1e-5 of max |out|).
void gdn_head_avx512(const GdnSequence& s, int32_t h);
}  // namespace cpu

}  // namespace pypto
