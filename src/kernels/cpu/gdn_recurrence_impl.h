#pragma once
// The gated delta rule's per-head recurrence (kernels/gdn_recurrence.h), written once on simd.h's
// wrappers and compiled by gdn_recurrence_avx2.cpp (8 lanes; AVX-512 keeps its own kernel,
// gdn_recurrence_avx512.cpp, until an AVX-512 host has measured this body). The call's tokens go in blocks of 64; within a block the head's state [d_k, d_v] is
// taken in column slices, each over all the block's tokens (the slice stays in cache from token
// to token); per token, pass 1 decays the slice's rows and accumulates u = Sᵀ k, pass 2 adds k uᵀ
// and accumulates out = Sᵀ q.
//
// Every column j of the state, of u and of out is one lane doing the same operations in the same
// order whatever kLanes or the slicing is (multiply, FMA over i ascending, subtract, multiply, FMA,
// FMA): any lane count gives the same bits, and so do one call over n tokens and n
// calls of one token (the state carried), which is what makes recurrent prefill, chunked prefill
// boundaries and decode agree bit for bit (model/gated_deltanet.h).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/backend.h"

#ifndef PYPTO_ISA_NS
#error "include kernels/cpu/simd.h first"
#endif

namespace pypto::cpu::PYPTO_ISA_NS {

// Columns [c0, c0 + kLanes·NB) of value head h over all n tokens of s: the state slice
// [d_k, kLanes·NB] (AVX2 at d_k = 128: 32 columns, 16 KiB, in L1 across the tokens when staged
// below), its u and its accumulators in registers. Columns are independent, so any split of d_v
// into slices gives the same bits. S: the slice's first row, rows ld floats apart.
template <int NB>
inline void gdn_slice(const GdnSequence& s, int32_t h, int32_t c0, float* S, int64_t ld) {
  const int32_t dk = s.d_k, dv = s.d_v, kh = h / (s.n_v / s.n_k);
  for (int64_t t = 0; t < s.n; ++t) {
    const float* q = s.q + t * s.qk_stride + int64_t(kh) * dk;
    const float* k = s.k + t * s.qk_stride + int64_t(kh) * dk;
    const float* v = s.v + t * s.v_stride + int64_t(h) * dv + c0;
    const vf decay = vset1(std::exp(s.g[t * s.n_v + h]));
    const vf beta = vset1(s.beta[t * s.n_v + h]);
    float* o = s.out + (t * s.n_v + h) * dv + c0;
    vf acc[NB], u[NB];
    for (int c = 0; c < NB; ++c) acc[c] = vzero();
    for (int32_t i = 0; i < dk; ++i) {  // S ← decay · S; acc = Sᵀ k
      float* row = S + int64_t(i) * ld;
      const vf ki = vset1(k[i]);
      for (int c = 0; c < NB; ++c) {
        const vf r = vmul(vload(row + kLanes * c), decay);
        vstore(row + kLanes * c, r);
        acc[c] = vfma(ki, r, acc[c]);
      }
    }
    for (int c = 0; c < NB; ++c) {  // u = β (v − Sᵀ k)
      u[c] = vmul(beta, vsub(vload(v + kLanes * c), acc[c]));
      acc[c] = vzero();
    }
    for (int32_t i = 0; i < dk; ++i) {  // S ← S + k uᵀ; acc = Sᵀ q
      float* row = S + int64_t(i) * ld;
      const vf ki = vset1(k[i]), qi = vset1(q[i]);
      for (int c = 0; c < NB; ++c) {
        const vf r = vfma(ki, u[c], vload(row + kLanes * c));
        vstore(row + kLanes * c, r);
        acc[c] = vfma(qi, r, acc[c]);
      }
    }
    for (int c = 0; c < NB; ++c) vstore(o + kLanes * c, acc[c]);
  }
}

// Slices of kGdnSliceVecs vectors (4 × 8 columns on AVX2: 4 accumulator chains per pass hide the
// FMA latency behind one 32-byte store per cycle; 8 × 16 on AVX-512, a whole d_v = 128 row as
// before), then single vectors for the rest of d_v.
inline constexpr int kGdnSliceVecs = kLanes == 16 ? 8 : 4;

// The slice in place for one token (decode: the state is streamed once either way) or when it is
// the whole row (AVX-512 at d_v = 128: already dense, 64 KiB, in L2 as before); over several
// tokens, copied into a dense [d_k, kLanes·NB] buffer first and back after (exact copies): rows of
// the state are d_v floats apart, 512 bytes at d_v = 128, and at that stride a 16 KiB slice maps
// onto a quarter of L1's sets and would not stay there.
template <int NB>
inline void gdn_slice_staged(const GdnSequence& s, int32_t h, int32_t c0) {
  const int64_t dk = s.d_k, dv = s.d_v, w = int64_t(kLanes) * NB;
  float* S = s.state + int64_t(h) * dk * dv + c0;
  if (s.n == 1 || w == dv) return gdn_slice<NB>(s, h, c0, S, dv);  // one token, or the slice is dense
  thread_local std::vector<float> buf;
  if (buf.size() < size_t(dk * w)) buf.resize(size_t(dk * w));
  for (int64_t i = 0; i < dk; ++i) std::memcpy(buf.data() + i * w, S + i * dv, sizeof(float) * size_t(w));
  gdn_slice<NB>(s, h, c0, buf.data(), w);
  for (int64_t i = 0; i < dk; ++i) std::memcpy(S + i * dv, buf.data() + i * w, sizeof(float) * size_t(w));
}

// Tokens per pass of the slices: the block's q, k rows (64 × 2 × 512 bytes at d_k = 128) stay in
// L2 while every slice of the head reads them, where a long prefill's rows would not.
inline constexpr int64_t kGdnTokenBlock = 64;

// Value head h of s over its n tokens; d_v a multiple of kLanes.
inline void gdn_head(const GdnSequence& s, int32_t h) {
  PYPTO_ASSERT(s.d_v % kLanes == 0, "d_v ", s.d_v);
  for (int64_t t0 = 0; t0 < s.n; t0 += kGdnTokenBlock) {
    GdnSequence b = s;  // tokens [t0, t0 + kGdnTokenBlock)
    b.q += t0 * s.qk_stride;
    b.k += t0 * s.qk_stride;
    b.v += t0 * s.v_stride;
    b.g += t0 * s.n_v;
    b.beta += t0 * s.n_v;
    b.out += t0 * s.n_v * s.d_v;
    b.n = std::min(kGdnTokenBlock, s.n - t0);
    int32_t c0 = 0;
    for (; c0 + kLanes * kGdnSliceVecs <= s.d_v; c0 += kLanes * kGdnSliceVecs)
      gdn_slice_staged<kGdnSliceVecs>(b, h, c0);
    for (; c0 < s.d_v; c0 += kLanes) gdn_slice_staged<1>(b, h, c0);
  }
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
