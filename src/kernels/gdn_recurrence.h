#pragma once
// The gated delta rule's per-head recurrence (kernels/backend.h GdnSequence), as plain scalar code
// (the definition) and the AVX-512 / AVX2 kernels the CPU backend runs where the ISA has them
// (the AVX2 one is cpu/gdn_recurrence_impl.h). All process one value head over all n tokens; heads are
// independent.
#include <cstdint>

#include "kernels/backend.h"

namespace pypto {

// Value head h of s over its n tokens: the definition, f32, sums in ascending index order.
void gdn_head_scalar(const GdnSequence& s, int32_t h);

namespace cpu {
// The same head with AVX-512 FMAs along d_v (16 lanes); d_v must be a multiple of 16, at most 512.
// Differs from gdn_head_scalar only by FMA rounding (tests/kernels: within 1e-5 of max |out|).
void gdn_head_avx512(const GdnSequence& s, int32_t h);
// The same with AVX2 + FMA (8 lanes); d_v a multiple of 8, at most 512. Differs from
// gdn_head_scalar only by FMA rounding, like the AVX-512 kernel.
void gdn_head_avx2(const GdnSequence& s, int32_t h);
}  // namespace cpu

}  // namespace pypto
