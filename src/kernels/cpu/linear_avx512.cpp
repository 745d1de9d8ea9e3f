// linear (GEMV / GEMM) for avx512: the shared kernel in linear_impl.h compiled with avx512 flags.
#define PYPTO_ISA_NS avx512
#include "kernels/cpu/simd.h"
#include "kernels/cpu/linear_impl.h"
#include "kernels/cpu/linear_bf16dot_impl.h"
#include "kernels/cpu/linear_f16_panels_impl.h"
#include "kernels/cpu/linear_f16_panels_bf16dot_impl.h"

namespace pypto::cpu {
void fill_linear_avx512(KernelTable& t) {
  t.linear_cols = avx512::linear_cols;
  t.linear_scratch_floats = avx512::linear_scratch_floats;
  t.linear_cols_bf16dot = avx512::linear_cols_bf16dot;
  t.linear_cols_f16_panels = avx512::linear_cols_f16_panels;
  t.linear_cols_f16_panels_bf16dot = avx512::linear_cols_f16_panels_bf16dot;
  t.split_bf16 = avx512::split_bf16;
  t.x_row_to_amx_tiles = avx512::x_row_to_amx_tiles;
}
}  // namespace pypto::cpu
