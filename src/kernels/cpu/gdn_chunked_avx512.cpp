// AVX-512 chunked gated delta rule (kernels/gdn_chunked.h). The work of a chunk is five matrix
// products, all through gemm_acc (C += A·B, row-major, 4 rows × 16·NV columns of accumulators held
// in registers, up to 4 × 64), plus the forward substitution (C²/2 row updates) and elementwise scalings. Each
// output element accumulates its k terms in ascending order whatever the blocking, so results do
// not depend on the row count or on other heads.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/gdn_chunked.h"

namespace pypto::cpu {
namespace {

// C[R rows, 16·NV cols] += A[R, k] · B[k, 16·NV].
template <int R, int NV>
inline void gemm_block(int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_loadu_ps(C + r * ldc + 16 * v);
  for (int64_t p = 0; p < k; ++p) {
    __m512 b[NV];
    for (int v = 0; v < NV; ++v) b[v] = _mm512_loadu_ps(B + p * ldb + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512 a = _mm512_set1_ps(A[r * lda + p]);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(a, b[v], acc[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(C + r * ldc + 16 * v, acc[r][v]);
}

template <int R>
inline void gemm_rows(int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
                      int64_t ldc) {
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) gemm_block<R, 4>(k, A, lda, B + j, ldb, C + j, ldc);
  if (j + 32 <= n) {
    gemm_block<R, 2>(k, A, lda, B + j, ldb, C + j, ldc);
    j += 32;
  }
  if (j < n) gemm_block<R, 1>(k, A, lda, B + j, ldb, C + j, ldc);
}

// C[m, n] += A[m, k] · B[k, n]; n a multiple of 16.
void gemm_acc(int64_t m, int64_t n, int64_t k, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
              int64_t ldc) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) gemm_rows<4>(n, k, A + i * lda, lda, B, ldb, C + i * ldc, ldc);
  for (; i < m; ++i) gemm_rows<1>(n, k, A + i * lda, lda, B, ldb, C + i * ldc, ldc);
}

// y[0, n) += a · x[0, n); n a multiple of 16.
inline void axpy(int64_t n, float a, const float* x, float* y) {
  const __m512 av = _mm512_set1_ps(a);
  for (int64_t j = 0; j < n; j += 16)
    _mm512_storeu_ps(y + j, _mm512_fmadd_ps(av, _mm512_loadu_ps(x + j), _mm512_loadu_ps(y + j)));
}

inline void scale(int64_t n, float a, float* y) {
  const __m512 av = _mm512_set1_ps(a);
  for (int64_t j = 0; j < n; j += 16) _mm512_storeu_ps(y + j, _mm512_mul_ps(av, _mm512_loadu_ps(y + j)));
}

// One thread's scratch for a head's chunk: C = kGdnChunk rows, d = 256 at most.
struct Scratch {
  static constexpr int64_t C = kGdnChunk, D = 256;
  float gam[C];
  float kt[D * C];  // Kᵀ [d_k, C] (columns past the chunk are 0)
  float ks[D * C];  // (diag(e^{γ_C − γ}) K)ᵀ [d_k, C]
  float decay[C * C];  // Γ_ij = e^{γ_i − γ_j} for j ≤ i [C, C]
  float kk[C * C];     // K Kᵀ, then A [C, C]
  float qk[C * C];  // Q Kᵀ, then its masked decayed form [C, C]
  float u[C * D];   // U, then V' [C, d_v]
  float w[C * D];   // −W [C, d_k]
  float o[C * D];   // O [C, d_v]
};

}  // namespace

void gdn_head_chunked_avx512(const GdnSequence& s, int32_t h) {
  const int64_t dk = s.d_k, dv = s.d_v, C = kGdnChunk;
  PYPTO_ASSERT(dk % 16 == 0 && dv % 16 == 0 && dk <= Scratch::D && dv <= Scratch::D, "d_k ", dk, ", d_v ", dv);
  const int32_t kh = h / (s.n_v / s.n_k);
  thread_local std::vector<Scratch> tls(1);
  Scratch& sc = tls[0];
  float* S = s.state + int64_t(h) * dk * dv;  // [d_k, d_v]
  for (int64_t t0 = 0; t0 < s.n; t0 += C) {
    const int64_t c = std::min(C, s.n - t0);
    const int64_t nc = (c + 15) / 16 * 16;  // columns of the C×C products, padded with zeros
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

}  // namespace pypto::cpu
