#pragma once
// The chunked gated delta rule (kernels/gdn_chunked.h), written once on simd.h's wrappers and
// compiled by gdn_chunked_avx2.cpp (8 lanes; AVX-512 keeps its own kernel, gdn_chunked_avx512.cpp,
// until an AVX-512 host has measured this body). The work of a
// chunk is five matrix products, all through gemm_acc (C += A·B, row-major, kGemmRows rows ×
// kLanes·NV columns of accumulators held in registers: 4 × 64 on AVX-512's 32 zmm registers,
// 6 × 16 on AVX2's 16 ymm), plus the forward substitution (C²/2 row updates) and elementwise
// scalings. Each output element accumulates its k terms in ascending order with one FMA each,
// starting from C, whatever the blocking or the lane count: results do not depend on the row
// count, on other heads, or on the ISA the file is compiled for (the scalar steps around the
// products are the same source under the same -ffp-contract=off).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/gdn_chunked.h"

#ifndef PYPTO_ISA_NS
#error "include kernels/cpu/simd.h first"
#endif

namespace pypto::cpu::PYPTO_ISA_NS {
namespace gdn_chunked_detail {

// Register blocking of gemm_block: kGemmRows × kGemmVecs accumulators, plus kGemmVecs B vectors
// and one broadcast A element (AVX-512: 16 + 4 + 1 of 32 registers; AVX2: 12 + 2 + 1 of 16).
inline constexpr int kGemmRows = kLanes == 16 ? 4 : 6;
inline constexpr int kGemmVecs = kLanes == 16 ? 4 : 2;

// C[R rows, kLanes·NV cols] += A[R, k] · B[k, kLanes·NV].
template <int R, int NV>
inline void gemm_block(int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc) {
  vf acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = vload(C + r * ldc + kLanes * v);
  for (int64_t p = 0; p < k; ++p) {
    vf b[NV];
    for (int v = 0; v < NV; ++v) b[v] = vload(B + p * ldb + kLanes * v);
    for (int r = 0; r < R; ++r) {
      const vf a = vset1(A[r * lda + p]);
      for (int v = 0; v < NV; ++v) acc[r][v] = vfma(a, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) vstore(C + r * ldc + kLanes * v, acc[r][v]);
}

// R rows of C over all n columns: blocks of kGemmVecs vectors, then halves down to one vector.
template <int R>
inline void gemm_rows(int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                      int64_t ldc) {
  constexpr int64_t W = int64_t(kLanes) * kGemmVecs;
  int64_t j = 0;
  for (; j + W <= n; j += W) gemm_block<R, kGemmVecs>(k, A, lda, B + j, ldb, C + j, ldc);
  if constexpr (kGemmVecs == 4) {
    if (j + 2 * kLanes <= n) {
      gemm_block<R, 2>(k, A, lda, B + j, ldb, C + j, ldc);
      j += 2 * kLanes;
    }
  }
  if (j < n) gemm_block<R, 1>(k, A, lda, B + j, ldb, C + j, ldc);
}

// C[m, n] += A[m, k] · B[k, n]; n a multiple of kLanes.
inline void gemm_acc(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb,
                     float* C, int64_t ldc) {
  int64_t i = 0;
  for (; i + kGemmRows <= m; i += kGemmRows) gemm_rows<kGemmRows>(n, k, A + i * lda, lda, B, ldb, C + i * ldc, ldc);
  if constexpr (kGemmRows > 4) {
    if (i + 4 <= m) {
      gemm_rows<4>(n, k, A + i * lda, lda, B, ldb, C + i * ldc, ldc);
      i += 4;
    }
  }
  if (i + 2 <= m) {
    gemm_rows<2>(n, k, A + i * lda, lda, B, ldb, C + i * ldc, ldc);
    i += 2;
  }
  if (i < m) gemm_rows<1>(n, k, A + i * lda, lda, B, ldb, C + i * ldc, ldc);
}

// y[0, n) += a · x[0, n); n a multiple of kLanes.
inline void axpy(int64_t n, float a, const float* x, float* y) {
  const vf av = vset1(a);
  for (int64_t j = 0; j < n; j += kLanes) vstore(y + j, vfma(av, vload(x + j), vload(y + j)));
}

inline void scale(int64_t n, float a, float* y) {
  const vf av = vset1(a);
  for (int64_t j = 0; j < n; j += kLanes) vstore(y + j, vmul(av, vload(y + j)));
}

// One thread's scratch for a head's chunk: C = kGdnChunk rows, d = 256 at most (~370 KiB).
struct Scratch {
  static constexpr int64_t C = kGdnChunk, D = 256;
  float gam[C];
  float kt[D * C];     // Kᵀ [d_k, nc] (columns past the chunk are 0)
  float ks[D * C];     // (diag(e^{γ_C − γ}) K)ᵀ [d_k, nc]
  float decay[C * C];  // Γ_ij = e^{γ_i − γ_j} for j ≤ i [C, C]
  float kk[C * C];     // K Kᵀ, then A [c, nc]
  float qk[C * C];     // Q Kᵀ, then its masked decayed form [c, nc]
  float u[C * D];      // U, then V' [c, d_v]
  float w[C * D];      // −W [c, d_k]
  float o[C * D];      // O [c, d_v]
};

}  // namespace gdn_chunked_detail

// Value head h of s over its n tokens in chunks of kGdnChunk; d_k and d_v multiples of kLanes, at
// most 256.
inline void gdn_head_chunked(const GdnSequence& s, int32_t h) {
  using namespace gdn_chunked_detail;
  const int64_t dk = s.d_k, dv = s.d_v, C = kGdnChunk;
  PYPTO_ASSERT(dk % kLanes == 0 && dv % kLanes == 0 && dk <= Scratch::D && dv <= Scratch::D, "d_k ", dk, ", d_v ",
               dv);
  const int32_t kh = h / (s.n_v / s.n_k);
  thread_local std::vector<Scratch> tls(1);
  Scratch& sc = tls[0];
  float* S = s.state + int64_t(h) * dk * dv;  // [d_k, d_v]
  for (int64_t t0 = 0; t0 < s.n; t0 += C) {
    const int64_t c = std::min(C, s.n - t0);
    const int64_t nc = (c + kLanes - 1) / kLanes * kLanes;  // columns of the C×C products, zero-padded
    const float* Q = s.q + t0 * s.qk_stride + int64_t(kh) * dk;  // rows [c, d_k], stride qk_stride
    const float* K = s.k + t0 * s.qk_stride + int64_t(kh) * dk;
    const float* g = s.g + t0 * s.n_v + h;  // stride n_v
    const float* beta = s.beta + t0 * s.n_v + h;
    float acc = 0.0f;
    for (int64_t i = 0; i < c; ++i) sc.gam[i] = acc += g[i * s.n_v];
    const float gam_last = sc.gam[c - 1];
    std::memset(sc.kt, 0, sizeof(float) * size_t(dk * nc));
    for (int64_t i = 0; i < c; ++i) {
      const float* ki = K + i * s.qk_stride;
      const float decay_to_end = std::exp(gam_last - sc.gam[i]);
      for (int64_t d = 0; d < dk; ++d) {
        sc.kt[d * nc + i] = ki[d];
        sc.ks[d * nc + i] = ki[d] * decay_to_end;
      }
    }
    for (int64_t i = 0; i < c; ++i)  // Γ, shared by A and the masked Q Kᵀ
      for (int64_t j = 0; j <= i; ++j) sc.decay[i * C + j] = std::exp(sc.gam[i] - sc.gam[j]);
    // A = strict_lower(β_i (K Kᵀ)_ij Γ_ij).
    std::memset(sc.kk, 0, sizeof(float) * size_t(c * nc));
    gemm_acc(c, nc, dk, K, s.qk_stride, sc.kt, nc, sc.kk, nc);
    for (int64_t i = 0; i < c; ++i)
      for (int64_t j = 0; j < i; ++j) sc.kk[i * nc + j] = beta[i * s.n_v] * sc.kk[i * nc + j] * sc.decay[i * C + j];
    // Forward substitution: U_i = β_i v_i − Σ_{j<i} A_ij U_j; −W_i = −β_i e^{γ_i} k_i − Σ_{j<i} A_ij (−W_j).
    for (int64_t i = 0; i < c; ++i) {
      const float* vi = s.v + (t0 + i) * s.v_stride + int64_t(h) * dv;
      const float* ki = K + i * s.qk_stride;
      float* ui = sc.u + i * dv;
      float* wi = sc.w + i * dk;
      const float b = beta[i * s.n_v], bw = -b * std::exp(sc.gam[i]);
      for (int64_t d = 0; d < dv; ++d) ui[d] = b * vi[d];
      for (int64_t d = 0; d < dk; ++d) wi[d] = bw * ki[d];
      for (int64_t j = 0; j < i; ++j) {
        const float a = -sc.kk[i * nc + j];
        axpy(dv, a, sc.u + j * dv, ui);
        axpy(dk, a, sc.w + j * dk, wi);
      }
    }
    // V' = U − W S (into u).
    gemm_acc(c, dv, dk, sc.w, dk, S, dv, sc.u, dv);
    // O = diag(e^γ) Q S + lower_incl_diag(Q Kᵀ ⊙ Γ) V'.
    std::memset(sc.o, 0, sizeof(float) * size_t(c * dv));
    gemm_acc(c, dv, dk, Q, s.qk_stride, S, dv, sc.o, dv);
    for (int64_t i = 0; i < c; ++i) scale(dv, std::exp(sc.gam[i]), sc.o + i * dv);
    std::memset(sc.qk, 0, sizeof(float) * size_t(c * nc));
    gemm_acc(c, nc, dk, Q, s.qk_stride, sc.kt, nc, sc.qk, nc);
    for (int64_t i = 0; i < c; ++i)
      for (int64_t j = 0; j < nc; ++j)
        sc.qk[i * nc + j] = j <= i ? sc.qk[i * nc + j] * sc.decay[i * C + j] : 0.0f;
    gemm_acc(c, dv, c, sc.qk, nc, sc.u, dv, sc.o, dv);
    for (int64_t i = 0; i < c; ++i)
      std::memcpy(s.out + ((t0 + i) * s.n_v + h) * dv, sc.o + i * dv, sizeof(float) * size_t(dv));
    // S ← e^{γ_C} S + (diag(e^{γ_C − γ}) K)ᵀ V'.
    const float decay_all = std::exp(gam_last);
    for (int64_t d = 0; d < dk; ++d) scale(dv, decay_all, S + d * dv);
    gemm_acc(dk, dv, c, sc.ks, nc, sc.u, dv, S, dv);
  }
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
