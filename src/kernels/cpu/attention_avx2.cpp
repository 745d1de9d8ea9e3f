// paged attention for avx2: attention_impl.h compiled with avx2 flags.
#define PYPTO_ISA_NS avx2
#include "kernels/cpu/simd.h"
#include "kernels/cpu/attention_impl.h"

namespace pypto::cpu {
void fill_attention_avx2(KernelTable& t) {
  t.attention = avx2::attention;
  t.attention_fold = avx2::attention_fold;
  t.attention_splits = avx2::attention_splits;
  t.attention_scratch_floats = avx2::attention_scratch_floats;
}
}  // namespace pypto::cpu
