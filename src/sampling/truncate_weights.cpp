#include "sampling/truncate_weights.h"

#include "sampling/exp_weights.h"

namespace pypto {

__attribute__((target_clones("avx512f", "avx2", "default"))) void masses_at_least(const float* w, size_t n,
                                                                                    const float* thresholds,
                                                                                    size_t count, double* masses) {
  for (size_t l = 0; l < count; ++l) {
    const float t = thresholds[l];
    double s[8] = {};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
      for (size_t j = 0; j < 8; ++j) s[j] += w[i + j] >= t ? double(w[i + j]) : 0.0;
    for (; i < n; ++i) s[i % 8] += w[i] >= t ? double(w[i]) : 0.0;
    WeightSum sum;
    for (size_t j = 0; j < 8; ++j) sum.s[j] = s[j];
    masses[l] = sum.total();
  }
}

__attribute__((target_clones("avx512f", "avx2", "default"))) void keep_weights(const float* x, float* w, size_t n,
                                                                                 bool has_boundary, float bx,
                                                                                 int32_t bid, float min_p) {
  for (size_t i = 0; i < n; ++i) {
    const bool at_least = !has_boundary || x[i] > bx || (x[i] == bx && static_cast<int32_t>(i) <= bid);
    w[i] = at_least && !(w[i] < min_p) ? w[i] : 0.0f;
  }
}

}  // namespace pypto
