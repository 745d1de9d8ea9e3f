// rms_norm, rope, silu_mul and conversions for avx512: elementwise_impl.h compiled with avx512 flags.
#define PYPTO_ISA_NS avx512
#include "kernels/cpu/simd.h"
#include "kernels/cpu/elementwise_impl.h"

namespace pypto::cpu {
void fill_elementwise_avx512(KernelTable& t) {
  t.rms_norm_rows = avx512::rms_norm_rows;
  t.rope_rows = avx512::rope_rows;
  t.silu_mul_rows = avx512::silu_mul_rows;
  t.to_f32 = avx512::to_f32;
  t.add_f32 = avx512::add_f32;
  t.from_f32 = avx512::from_f32;
}
}  // namespace pypto::cpu
