// paged attention for avx512: attention_impl.h compiled with avx512 flags.
#define PYPTO_ISA_NS avx512
#include "kernels/cpu/simd.h"
#include "kernels/cpu/attention_impl.h"

namespace pypto::cpu {
void fill_attention_avx512(KernelTable& t) {
  t.attention = avx512::attention;
  t.attention_fold = avx512::attention_fold;
  t.attention_splits = avx512::attention_splits;
  t.attention_scratch_floats = avx512::attention_scratch_floats;
}
}  // namespace pypto::cpu
