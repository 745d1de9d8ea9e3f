// AVX2 + FMA gated delta rule, one value head over a sequence's tokens (kernels/gdn_recurrence.h):
// gdn_recurrence_impl.h compiled with AVX2 flags (8 lanes along d_v).
#define PYPTO_ISA_NS avx2
#include "kernels/cpu/simd.h"
#include "kernels/cpu/gdn_recurrence_impl.h"
#include "kernels/gdn_recurrence.h"

namespace pypto::cpu {
void gdn_head_avx2(const GdnSequence& s, int32_t h) { avx2::gdn_head(s, h); }
}  // namespace pypto::cpu
