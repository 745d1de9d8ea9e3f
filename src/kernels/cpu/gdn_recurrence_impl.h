#pragma once
// The gated delta rule's per-head recurrence (kernels/gdn_recurrence.h), written once on simd.h's
// wrappers and compiled by gdn_recurrence_avx512.cpp (16 lanes) and gdn_recurrence_avx2.cpp
// (8 lanes). The state row S[i, :] (d_v floats) is processed kLanes columns at a time: pass 1
// decays the rows and accumulates u = Sᵀ k, pass 2 adds k uᵀ and accumulates out = Sᵀ q. For
// d_k = d_v = 128 the state of a head is 64 KiB, so both passes stream it from L2.
//
// Every column j of the state, of u and of out is one lane doing the same operations in the same
// order whatever kLanes is (multiply, FMA over i ascending, subtract, multiply, FMA, FMA): the
// AVX2 and AVX-512 builds give the same bits, and so do one call over n tokens and n calls of one
// token (the state carried), which is what makes recurrent prefill, chunked prefill boundaries and
// decode agree bit for bit (model/gated_deltanet.h).
#include <cmath>

#include "core/error.h"
#include "kernels/backend.h"

#ifndef PYPTO_ISA_NS
#error "include kernels/cpu/simd.h first"
#endif

namespace pypto::cpu::PYPTO_ISA_NS {

// Largest d_v: the accumulators and u of one token live in two arrays of kMaxDv / kLanes vectors.
inline constexpr int32_t kGdnMaxDv = 512;

// Value head h of s over its n tokens; d_v a multiple of kLanes, at most kGdnMaxDv.
inline void gdn_head(const GdnSequence& s, int32_t h) {
  const int32_t dk = s.d_k, dv = s.d_v, kh = h / (s.n_v / s.n_k);
  PYPTO_ASSERT(dv % kLanes == 0 && dv <= kGdnMaxDv, "d_v ", dv);
  const int32_t nvec = dv / kLanes;
  float* S = s.state + int64_t(h) * dk * dv;  // [d_k, d_v]
  vf acc[kGdnMaxDv / kLanes], u[kGdnMaxDv / kLanes];
  for (int64_t t = 0; t < s.n; ++t) {
    const float* q = s.q + t * s.qk_stride + int64_t(kh) * dk;
    const float* k = s.k + t * s.qk_stride + int64_t(kh) * dk;
    const float* v = s.v + t * s.v_stride + int64_t(h) * dv;
    const vf decay = vset1(std::exp(s.g[t * s.n_v + h]));
    const vf beta = vset1(s.beta[t * s.n_v + h]);
    float* o = s.out + (t * s.n_v + h) * dv;
    for (int32_t c = 0; c < nvec; ++c) acc[c] = vzero();
    for (int32_t i = 0; i < dk; ++i) {  // S ← decay · S; acc = Sᵀ k
      float* row = S + int64_t(i) * dv;
      const vf ki = vset1(k[i]);
      for (int32_t c = 0; c < nvec; ++c) {
        const vf r = vmul(vload(row + kLanes * c), decay);
        vstore(row + kLanes * c, r);
        acc[c] = vfma(ki, r, acc[c]);
      }
    }
    for (int32_t c = 0; c < nvec; ++c) {  // u = β (v − Sᵀ k)
      u[c] = vmul(beta, vsub(vload(v + kLanes * c), acc[c]));
      acc[c] = vzero();
    }
    for (int32_t i = 0; i < dk; ++i) {  // S ← S + k uᵀ; acc = Sᵀ q
      float* row = S + int64_t(i) * dv;
      const vf ki = vset1(k[i]), qi = vset1(q[i]);
      for (int32_t c = 0; c < nvec; ++c) {
        const vf r = vfma(ki, u[c], vload(row + kLanes * c));
        vstore(row + kLanes * c, r);
        acc[c] = vfma(qi, r, acc[c]);
      }
    }
    for (int32_t c = 0; c < nvec; ++c) vstore(o + kLanes * c, acc[c]);
  }
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
