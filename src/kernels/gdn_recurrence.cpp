#include "kernels/gdn_recurrence.h"

#include <cmath>
#include <vector>

#include "core/error.h"

namespace pypto {

void gdn_head_scalar(const GdnSequence& s, int32_t h) {
  const int32_t dk = s.d_k, dv = s.d_v, kh = h / (s.n_v / s.n_k);
  float* S = s.state + int64_t(h) * dk * dv;  // [d_k, d_v]
  std::vector<float> u(size_t(dv), 0.0f);
  for (int64_t t = 0; t < s.n; ++t) {
    const float* q = s.q + t * s.qk_stride + int64_t(kh) * dk;
    const float* k = s.k + t * s.qk_stride + int64_t(kh) * dk;
    const float* v = s.v + t * s.v_stride + int64_t(h) * dv;
    const float decay = std::exp(s.g[t * s.n_v + h]), beta = s.beta[t * s.n_v + h];
    float* o = s.out + (t * s.n_v + h) * dv;
    for (int32_t j = 0; j < dv; ++j) u[size_t(j)] = 0.0f;  // u ← Sᵀ k after the decay
    for (int32_t i = 0; i < dk; ++i) {
      float* row = S + int64_t(i) * dv;
      for (int32_t j = 0; j < dv; ++j) {
        row[j] *= decay;
        u[size_t(j)] += k[i] * row[j];
      }
    }
    for (int32_t j = 0; j < dv; ++j) u[size_t(j)] = beta * (v[j] - u[size_t(j)]);
    for (int32_t j = 0; j < dv; ++j) o[j] = 0.0f;
    for (int32_t i = 0; i < dk; ++i) {
      float* row = S + int64_t(i) * dv;
      for (int32_t j = 0; j < dv; ++j) {
        row[j] += k[i] * u[size_t(j)];
        o[j] += q[i] * row[j];
      }
    }
  }
}

void Backend::gated_delta_rule(const GdnSequence& s) {
  PYPTO_ASSERT(s.n_k > 0 && s.n_v % s.n_k == 0 && s.d_k > 0 && s.d_v > 0, "GDN shape ", s.n_k, "/", s.n_v);
  for (int32_t h = 0; h < s.n_v; ++h) gdn_head_scalar(s, h);
}

void Backend::gated_delta_rule_head(const GdnSequence& s, int32_t h) { gdn_head_scalar(s, h); }

void Backend::gated_delta_rule_chunked(const GdnSequence& s) {
  PYPTO_ASSERT(false, "backend ", name(), " has no chunked gated delta rule (d_k ", s.d_k, ", d_v ", s.d_v, ")");
}

}  // namespace pypto
