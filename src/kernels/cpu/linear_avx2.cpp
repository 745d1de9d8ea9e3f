// linear (GEMV / GEMM) for avx2: the shared kernel in linear_impl.h compiled with avx2 flags.
#define PYPTO_ISA_NS avx2
#include "kernels/cpu/simd.h"
#include "kernels/cpu/linear_impl.h"

namespace pypto::cpu {
void fill_linear_avx2(KernelTable& t) {
  t.linear_cols = avx2::linear_cols;
  t.linear_scratch_floats = avx2::linear_scratch_floats;
}
}  // namespace pypto::cpu
