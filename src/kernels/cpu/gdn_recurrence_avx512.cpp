// AVX-512 gated delta rule, one value head over a sequence's tokens (kernels/gdn_recurrence.h).
// The state row S[i, :] (d_v floats) is processed 16 lanes at a time: pass 1 decays the rows and
// accumulates u = Sᵀ k, pass 2 adds k uᵀ and accumulates out = Sᵀ q. For d_v = 128 the state of a
// head is 64 KiB (d_k = 128), so both passes stream it from L2.
#include <immintrin.h>

#include <cmath>

#include "core/error.h"
#include "kernels/gdn_recurrence.h"

namespace pypto::cpu {

void gdn_head_avx512(const GdnSequence& s, int32_t h) {
  const int32_t dk = s.d_k, dv = s.d_v, kh = h / (s.n_v / s.n_k);
  PYPTO_ASSERT(dv % 16 == 0 && dv <= 512, "d_v ", dv);
  const int32_t nvec = dv / 16;
  float* S = s.state + int64_t(h) * dk * dv;
  __m512 acc[32];
  for (int64_t t = 0; t < s.n; ++t) {
    const float* q = s.q + t * s.qk_stride + int64_t(kh) * dk;
    const float* k = s.k + t * s.qk_stride + int64_t(kh) * dk;
    const float* v = s.v + t * s.v_stride + int64_t(h) * dv;
    const __m512 decay = _mm512_set1_ps(std::exp(s.g[t * s.n_v + h]));
    const __m512 beta = _mm512_set1_ps(s.beta[t * s.n_v + h]);
    float* o = s.out + (t * s.n_v + h) * dv;
    for (int32_t c = 0; c < nvec; ++c) acc[c] = _mm512_setzero_ps();
    for (int32_t i = 0; i < dk; ++i) {  // S ← decay · S; acc = Sᵀ k
      float* row = S + int64_t(i) * dv;
      const __m512 ki = _mm512_set1_ps(k[i]);
      for (int32_t c = 0; c < nvec; ++c) {
        const __m512 r = _mm512_mul_ps(_mm512_loadu_ps(row + 16 * c), decay);
        _mm512_storeu_ps(row + 16 * c, r);
        acc[c] = _mm512_fmadd_ps(ki, r, acc[c]);
      }
    }
    __m512 u[32];
    for (int32_t c = 0; c < nvec; ++c) {
      u[c] = _mm512_mul_ps(beta, _mm512_sub_ps(_mm512_loadu_ps(v + 16 * c), acc[c]));
      acc[c] = _mm512_setzero_ps();
    }
    for (int32_t i = 0; i < dk; ++i) {  // S ← S + k uᵀ; acc = Sᵀ q
      float* row = S + int64_t(i) * dv;
      const __m512 ki = _mm512_set1_ps(k[i]), qi = _mm512_set1_ps(q[i]);
      for (int32_t c = 0; c < nvec; ++c) {
        const __m512 r = _mm512_fmadd_ps(ki, u[c], _mm512_loadu_ps(row + 16 * c));
        _mm512_storeu_ps(row + 16 * c, r);
        acc[c] = _mm512_fmadd_ps(qi, r, acc[c]);
      }
    }
    for (int32_t c = 0; c < nvec; ++c) _mm512_storeu_ps(o + 16 * c, acc[c]);
  }
}

}  // namespace pypto::cpu
