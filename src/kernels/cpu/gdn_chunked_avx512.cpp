// AVX-512 chunked gated delta rule (kernels/gdn_chunked.h): gdn_chunked_impl.h compiled with
// AVX-512 flags (16 lanes, 4 × 64 register blocks).
#define PYPTO_ISA_NS avx512
#include "kernels/cpu/simd.h"
#include "kernels/cpu/gdn_chunked_impl.h"

namespace pypto::cpu {
void gdn_head_chunked_avx512(const GdnSequence& s, int32_t h) { avx512::gdn_head_chunked(s, h); }
}  // namespace pypto::cpu
