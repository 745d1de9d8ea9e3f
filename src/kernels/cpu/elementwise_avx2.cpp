// rms_norm, rope, silu_mul and conversions for avx2: elementwise_impl.h compiled with avx2 flags.
#define PYPTO_ISA_NS avx2
#include "kernels/cpu/simd.h"
#include "kernels/cpu/elementwise_impl.h"

namespace pypto::cpu {
void fill_elementwise_avx2(KernelTable& t) {
  t.rms_norm_rows = avx2::rms_norm_rows;
  t.rope_rows = avx2::rope_rows;
  t.silu_mul_rows = avx2::silu_mul_rows;
  t.to_f32 = avx2::to_f32;
  t.add_f32 = avx2::add_f32;
  t.from_f32 = avx2::from_f32;
}
}  // namespace pypto::cpu
