// linear (GEMV / GEMM) for avx2: the shared kernels in linear_impl.h (plain rows: f32 weights),
// linear_bf16_panels_f32_impl.h (bf16 pair panels) and linear_f16_panels_impl.h (f16 column
// panels) compiled with avx2 flags.
#define PYPTO_ISA_NS avx2
#include "kernels/cpu/simd.h"
#include "kernels/cpu/linear_impl.h"
#include "kernels/cpu/linear_bf16_panels_f32_impl.h"
#include "kernels/cpu/linear_f16_panels_impl.h"

namespace pypto::cpu {
void fill_linear_avx2(KernelTable& t) {
  t.linear_cols = avx2::linear_cols;
  t.linear_scratch_floats = avx2::linear_scratch_floats;
  t.linear_cols_f16_panels = avx2::linear_cols_f16_panels;
  t.linear_cols_bf16_panels_f32 = avx2::linear_cols_bf16_panels_f32;
}
}  // namespace pypto::cpu
