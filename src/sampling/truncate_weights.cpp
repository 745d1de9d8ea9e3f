#include "sampling/truncate_weights.h"

namespace pypto {

__attribute__((target_clones("avx512f", "avx2", "default"))) void keep_weights(const float* x, float* w, size_t n,
                                                                                 bool has_boundary, float bx,
                                                                                 int32_t bid, float min_p) {
  for (size_t i = 0; i < n; ++i) {
    const bool at_least = !has_boundary || x[i] > bx || (x[i] == bx && static_cast<int32_t>(i) <= bid);
    w[i] = at_least && !(w[i] < min_p) ? w[i] : 0.0f;
  }
}

}  // namespace pypto
