#include "sampling/exp_weights.h"

namespace pypto {

namespace {

constexpr size_t kLanes = 8;  // running sums of the double reductions
constexpr size_t kChunk = 1024;

// The fixed order of the reductions (WeightSum's): s[l] += v[i] for i ≡ l (mod 8) in increasing
// i, then ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7)).
double combine(const double (&s)[kLanes]) {
  WeightSum w;
  for (size_t l = 0; l < kLanes; ++l) w.s[l] = s[l];
  return w.total();
}

// s[(base + i) % 8] += v[i] for the i in [0, n) (kAll) or those with v[i] >= threshold; base a
// multiple of 8.
template <bool kAll>
void accumulate(const float* v, size_t n, size_t base, float threshold, double (&s)[kLanes]) {
  auto term = [threshold](float x) { return kAll || x >= threshold ? double(x) : 0.0; };
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (size_t l = 0; l < kLanes; ++l) s[l] += term(v[i + l]);
  for (; i < n; ++i) s[(base + i) % kLanes] += term(v[i]);
}

}  // namespace

__attribute__((target_clones("avx512f", "avx2", "default"))) void exp_weights(const float* x, size_t n, float max,
                                                                                float* w) {
  for (size_t i = 0; i < n; ++i) w[i] = exp_weight(x[i] - max);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) double sum_exp_weights(const float* x, size_t n,
                                                                                      float max) {
  double s[kLanes] = {};
  float buf[kChunk];
  for (size_t i0 = 0; i0 < n; i0 += kChunk) {
    const size_t m = n - i0 < kChunk ? n - i0 : kChunk;
    for (size_t i = 0; i < m; ++i) buf[i] = exp_weight(x[i0 + i] - max);
    accumulate<true>(buf, m, i0, 0.0f, s);
  }
  return combine(s);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) double mass_at_least(const float* w, size_t n,
                                                                                    float threshold) {
  double s[kLanes] = {};
  accumulate<false>(w, n, 0, threshold, s);
  return combine(s);
}

__attribute__((target_clones("avx512f", "avx2", "default"))) double sum_weights(const float* w, size_t n) {
  double s[kLanes] = {};
  accumulate<true>(w, n, 0, 0.0f, s);
  return combine(s);
}

}  // namespace pypto
