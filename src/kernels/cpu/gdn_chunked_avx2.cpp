// AVX2 + FMA chunked gated delta rule (kernels/gdn_chunked.h): gdn_chunked_impl.h compiled with
// AVX2 flags (8 lanes, 6 × 16 register blocks).
#define PYPTO_ISA_NS avx2
#include "kernels/cpu/simd.h"
#include "kernels/cpu/gdn_chunked_impl.h"

namespace pypto::cpu {
void gdn_head_chunked_avx2(const GdnSequence& s, int32_t h) { avx2::gdn_head_chunked(s, h); }
}  // namespace pypto::cpu
