// The chunked gated delta rule (kernels/gdn_chunked.h) with its matrix products on AVX-512 BF16
// dot products (VDPBF16PS: 32 bf16 multiplies added pairwise into 16 f32 lanes), f32 accumulation,
// the state S kept in f32. Per chunk of c ≤ 64 tokens (nc: c padded to 16, the padding zeros):
//   KK  = K Kᵀ                 [c, nc]  k = d_k     A = strict_lower(β KK ⊙ Γ)
//   T   = (I + A)⁻¹            [c, nc]  forward substitution on the C×C block alone (f32, C³/6)
//   U   = T (diag(β) V)        [c, d_v] k = nc      −W = T (−diag(β e^γ) K)   [c, d_k]
//   V'  = U + (−W) S           [c, d_v] k = d_k
//   O   = diag(e^γ) Q S + (Q Kᵀ ⊙ Γ, lower incl. diagonal) V'                 k = d_k, nc
//   S   ← e^{γ_C} S + (diag(e^{γ_C − γ}) K)ᵀ V'   [d_k, d_v] k = nc
// Unlike the f32 kernel, which solves for U and W row by row (C²/2 vector updates of rows of
// width d), the substitution runs on T alone and U, W become two more matrix products: all the
// C·d-sized work is on the dot-product unit; and the decays Γ take the vector e^x (simd.h vexp,
// ~2 ulp) instead of C²/2 calls of std::exp.
//
// Operands (bf16 bits, two per 32-bit word: a "pair" of adjacent k):
//   A (left) operands row-major, pairs along k: a[i · lda + q] = (A[i, 2q], A[i, 2q + 1]);
//   B (right) operands as pair panels of 16 columns: b[(p · kp + q) · 16 + c] = (B[2q, 16p + c],
//   B[2q + 1, 16p + c]), kp = pairs of k, the layout VDPBF16PS multiplies a broadcast A pair with.
// With parts = 3 each f32 operand x is split as hi = bf16(x), lo = bf16(x − hi) (x ≈ hi + lo to
// ~16 bits) and a product is hi·hi + hi·lo + lo·hi (the lo·lo term, ~2^-16 of it, dropped), three
// VDPBF16PS per pair; parts = 1 uses hi alone (8 bits, one VDPBF16PS). Each output adds its pairs
// in ascending k order (and hi·hi, hi·lo, lo·hi within a pair) whatever the tile, so a head's
// result does not depend on other heads or on where a caller splits the rows at multiples of C.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "kernels/gdn_chunked.h"

#define PYPTO_ISA_NS avx512
#include "kernels/cpu/simd.h"

namespace pypto::cpu {
namespace {

constexpr int64_t kC = kGdnChunk, kD = 256;

// f32 → bf16 bits (round to nearest even) in the low 16 bits of each 32-bit lane; and those bits
// back to f32 (exact), so that x − hi is the lo part's exact f32 value.
inline __m512i bf16_bits32(__m512 x) { return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(x)); }
inline __m512 bits32_to_f32(__m512i b) { return _mm512_castsi512_ps(_mm512_slli_epi32(b, 16)); }

// Pairs (x0[c], x1[c]) of 16 columns as 16 words, hi and (parts 3) lo.
template <int P>
inline void make_pairs(__m512 x0, __m512 x1, __m512i& hi, __m512i& lo) {
  const __m512i h0 = bf16_bits32(x0), h1 = bf16_bits32(x1);
  hi = _mm512_or_si512(h0, _mm512_slli_epi32(h1, 16));
  if constexpr (P == 3) {
    const __m512i l0 = bf16_bits32(_mm512_sub_ps(x0, bits32_to_f32(h0)));
    const __m512i l1 = bf16_bits32(_mm512_sub_ps(x1, bits32_to_f32(h1)));
    lo = _mm512_or_si512(l0, _mm512_slli_epi32(l1, 16));
  }
}

// X [rows, n] f32 (row stride ldx, row r scaled by scale[r] when given, rows ≥ rows read as 0),
// as pairs along its rows, for kp pairs (2 kp ≥ rows), n a multiple of 16:
//   panels (TRANSPOSE false): the B operand X, out[(p · kp + q) · 16 + c];
//   rows (TRANSPOSE true): the A operand Xᵀ [n, 2 kp], out[j · kp + q] for column j of X.
template <int P, bool TRANSPOSE>
void pack_pairs(const float* X, int64_t ldx, int64_t rows, int64_t n, const float* scale, int64_t kp, uint32_t* hi,
                uint32_t* lo) {
  const __m512i cols = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(int32_t(kp)));
  for (int64_t q = 0; q < kp; ++q) {
    const int64_t r0 = 2 * q, r1 = 2 * q + 1;
    const float s0 = r0 < rows ? (scale ? scale[r0] : 1.0f) : 0.0f;
    const float s1 = r1 < rows ? (scale ? scale[r1] : 1.0f) : 0.0f;
    for (int64_t p = 0; p < n / 16; ++p) {
      const __m512 x0 = r0 < rows ? _mm512_mul_ps(_mm512_set1_ps(s0), _mm512_loadu_ps(X + r0 * ldx + 16 * p))
                                  : _mm512_setzero_ps();
      const __m512 x1 = r1 < rows ? _mm512_mul_ps(_mm512_set1_ps(s1), _mm512_loadu_ps(X + r1 * ldx + 16 * p))
                                  : _mm512_setzero_ps();
      __m512i h, l;
      make_pairs<P>(x0, x1, h, l);
      if constexpr (TRANSPOSE) {
        uint32_t* base_h = hi + 16 * p * kp + q;
        _mm512_i32scatter_epi32(base_h, cols, h, 4);
        if constexpr (P == 3) _mm512_i32scatter_epi32(lo + 16 * p * kp + q, cols, l, 4);
      } else {
        _mm512_storeu_si512(hi + (p * kp + q) * 16, h);
        if constexpr (P == 3) _mm512_storeu_si512(lo + (p * kp + q) * 16, l);
      }
    }
  }
}

// X [rows, k] f32 (row stride ldx, k a multiple of 16) as the A operand: bf16 X row by row is
// already pairs along k (the first of a pair in the low half of the word), out[i · (k/2) + q].
template <int P>
void pack_rows(const float* X, int64_t ldx, int64_t rows, int64_t k, uint32_t* hi, uint32_t* lo) {
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < k; j += 16) {
      const __m512 x = _mm512_loadu_ps(X + i * ldx + j);
      const __m256i h = (__m256i)_mm512_cvtneps_pbh(x);
      _mm256_storeu_si256((__m256i*)(hi + (i * k + j) / 2), h);
      if constexpr (P == 3) {
        const __m512 r = _mm512_sub_ps(x, bits32_to_f32(_mm512_cvtepu16_epi32(h)));
        _mm256_storeu_si256((__m256i*)(lo + (i * k + j) / 2), (__m256i)_mm512_cvtneps_pbh(r));
      }
    }
}

// The B operand B [k, n] = Xᵀ where X [n, k] is already an A operand (a, lda = k/2
// words per row), n a multiple of 16: the panels gather word q of 16 rows.
void panels_of_rows_t(const uint32_t* a, int64_t kp, int64_t n, uint32_t* out) {
  const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(int32_t(kp)));
  for (int64_t p = 0; p < n / 16; ++p)
    for (int64_t q = 0; q < kp; ++q)
      _mm512_storeu_si512(out + (p * kp + q) * 16, _mm512_i32gather_epi32(rows, a + 16 * p * kp + q, 4));
}

// C[R, 16 NV] += A[R, 2 kp] · B[2 kp, 16 NV] (SET: C = A · B, the sums starting from 0 as they
// would from a zeroed C): R rows of A (lda words apart), NV panels of B (pstride words apart).
template <int P, bool SET, int R, int NV>
inline void dot_block(int64_t kp, const uint32_t* ah, const uint32_t* al, int64_t lda, const uint32_t* bh,
                      const uint32_t* bl, int64_t pstride, float* C, int64_t ldc) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = SET ? _mm512_setzero_ps() : _mm512_loadu_ps(C + r * ldc + 16 * v);
  for (int64_t q = 0; q < kp; ++q) {
    __m512bh wh[NV], wl[NV];
    for (int v = 0; v < NV; ++v) {
      wh[v] = (__m512bh)_mm512_loadu_si512(bh + v * pstride + q * 16);
      if constexpr (P == 3) wl[v] = (__m512bh)_mm512_loadu_si512(bl + v * pstride + q * 16);
    }
    for (int r = 0; r < R; ++r) {
      const __m512bh xh = (__m512bh)_mm512_set1_epi32(int32_t(ah[r * lda + q]));
      if constexpr (P == 3) {
        const __m512bh xl = (__m512bh)_mm512_set1_epi32(int32_t(al[r * lda + q]));
        for (int v = 0; v < NV; ++v) {
          acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xh, wh[v]);
          acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xh, wl[v]);
          acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xl, wh[v]);
        }
      } else {
        for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xh, wh[v]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(C + r * ldc + 16 * v, acc[r][v]);
}

template <int P, bool SET, int R>
inline void dot_rows(int64_t n, int64_t kp, const uint32_t* ah, const uint32_t* al, int64_t lda, const uint32_t* bh,
                     const uint32_t* bl, float* C, int64_t ldc) {
  const int64_t ps = 16 * kp;  // words per panel
  int64_t j = 0;
  for (; j + 64 <= n; j += 64) dot_block<P, SET, R, 4>(kp, ah, al, lda, bh + j * kp, bl + j * kp, ps, C + j, ldc);
  if (j + 32 <= n) {
    dot_block<P, SET, R, 2>(kp, ah, al, lda, bh + j * kp, bl + j * kp, ps, C + j, ldc);
    j += 32;
  }
  if (j < n) dot_block<P, SET, R, 1>(kp, ah, al, lda, bh + j * kp, bl + j * kp, ps, C + j, ldc);
}

// C[m, n] += A[m, 2 kp] · B[2 kp, n] (SET: C = A · B; A rows of kp words, B pair panels, n a
// multiple of 16).
template <int P, bool SET = false>
void dot_acc(int64_t m, int64_t n, int64_t kp, const uint32_t* ah, const uint32_t* al, const uint32_t* bh,
             const uint32_t* bl, float* C, int64_t ldc) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) dot_rows<P, SET, 4>(n, kp, ah + i * kp, al + i * kp, kp, bh, bl, C + i * ldc, ldc);
  for (; i < m; ++i) dot_rows<P, SET, 1>(n, kp, ah + i * kp, al + i * kp, kp, bh, bl, C + i * ldc, ldc);
}

// Row x [nc] ← (b · x[j]) · Γ[j] for j < keep, 0 from keep on (the product order of the scalar
// form; lanes past keep may hold anything, Γ's too).
inline void mask_decay_row(int64_t nc, int64_t keep, __m512 b, const float* decay, float* x) {
  for (int64_t j = 0; j < nc; j += 16) {
    const int64_t n = std::clamp<int64_t>(keep - j, 0, 16);
    const __mmask16 m = __mmask16(n == 16 ? 0xFFFFu : (1u << n) - 1);
    const __m512 bx = _mm512_mul_ps(b, _mm512_loadu_ps(x + j));
    _mm512_storeu_ps(x + j, _mm512_maskz_mul_ps(m, bx, _mm512_loadu_ps(decay + j)));
  }
}

// T = (I + A)⁻¹ for A strictly lower [c, 16 NV] (row stride 16 NV), by forward substitution:
// T_i = e_i − Σ_{j<i} A_ij T_j, row i in NV registers; T_j is zero past column j, so only its
// blocks up to j are read. Rows [c, 16 NV) of t are not written.
template <int NV>
void solve_unit_lower(int64_t c, const float* a, float* t) {
  constexpr int64_t nc = 16 * NV;
  for (int64_t i = 0; i < c; ++i) {
    __m512 row[NV];
    for (int v = 0; v < NV; ++v)
      row[v] = _mm512_maskz_mov_ps(__mmask16(i / 16 == v ? 1u << (i % 16) : 0), _mm512_set1_ps(1.0f));
    for (int64_t j = 0; j < i; ++j) {
      const __m512 aij = _mm512_set1_ps(-a[i * nc + j]);
      for (int v = 0; v < NV; ++v)
        if (16 * v <= j) row[v] = _mm512_fmadd_ps(aij, _mm512_loadu_ps(t + j * nc + 16 * v), row[v]);
    }
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(t + i * nc + 16 * v, row[v]);
  }
}

// One thread's scratch for a head's chunk (sizes for C = 64, d ≤ 256).
struct Scratch {
  float gam[kC], bv[kC], bk[kC], to_end[kC];
  float decay[kC * kC];  // Γ_ij = e^{γ_i − γ_j}, j ≤ i
  float a[kC * kC];      // K Kᵀ, then A
  float t[kC * kC];      // (I + A)⁻¹
  float qk[kC * kC];     // Q Kᵀ, then masked and decayed
  float u[kC * kD];      // U, then V' [c, d_v]
  float w[kC * kD];      // −W [c, d_k]
  uint32_t q2[2][kC * kD / 2], k2[2][kC * kD / 2];  // Q, K rows (A operands, pairs along d_k)
  uint32_t kt2[2][kC * kD / 2];                    // Kᵀ panels [d_k, nc]
  uint32_t s2[2][kD * kD / 2];                     // S panels [d_k, d_v]
  uint32_t bv2[2][kC * kD / 2], bk2[2][kC * kD / 2];  // diag(β) V, −diag(β e^γ) K panels along tokens
  uint32_t t2[2][kC * kC / 2], qk2[2][kC * kC / 2];  // T, masked Q Kᵀ rows (pairs along tokens)
  uint32_t w2[2][kC * kD / 2];                     // −W rows
  uint32_t vp2[2][kC * kD / 2];                    // V' panels along tokens [nc, d_v]
  uint32_t ks2[2][kD * kC / 2];                    // (diag(e^{γ_C − γ}) K)ᵀ rows [d_k, nc]
};

template <int P>
void head_chunked(const GdnSequence& s, int32_t h) {
  const int64_t dk = s.d_k, dv = s.d_v;
  PYPTO_ASSERT(dk % 16 == 0 && dv % 16 == 0 && dk <= kD && dv <= kD, "d_k ", dk, ", d_v ", dv);
  const int32_t kh = h / (s.n_v / s.n_k);
  thread_local std::vector<Scratch> tls(1);
  Scratch& sc = tls[0];
  float* S = s.state + int64_t(h) * dk * dv;  // [d_k, d_v]
  const int64_t dkp = dk / 2;
  for (int64_t t0 = 0; t0 < s.n; t0 += kC) {
    const int64_t c = std::min(kC, s.n - t0);
    const int64_t nc = (c + 15) / 16 * 16, ncp = nc / 2;
    const float* Q = s.q + t0 * s.qk_stride + int64_t(kh) * dk;  // [c, d_k], stride qk_stride
    const float* K = s.k + t0 * s.qk_stride + int64_t(kh) * dk;
    const float* V = s.v + t0 * s.v_stride + int64_t(h) * dv;  // [c, d_v], stride v_stride
    float acc = 0.0f;
    for (int64_t i = 0; i < c; ++i) {
      sc.gam[i] = acc += s.g[(t0 + i) * s.n_v + h];
      const float b = s.beta[(t0 + i) * s.n_v + h];
      sc.bv[i] = b;
      sc.bk[i] = -b * std::exp(sc.gam[i]);
    }
    const float gam_last = sc.gam[c - 1];
    for (int64_t i = 0; i < c; ++i) sc.to_end[i] = std::exp(gam_last - sc.gam[i]);
    for (int64_t i = 0; i < c; ++i)  // Γ_ij for j ≤ i (16 at a time, vector e^x: simd.h vexp)
      for (int64_t j = 0; j <= i; j += 16)
        _mm512_storeu_ps(sc.decay + i * kC + j,
                         avx512::vexp(_mm512_sub_ps(_mm512_set1_ps(sc.gam[i]), _mm512_loadu_ps(sc.gam + j))));

    // The chunk's operands. K's rows past c are zero (Kᵀ's padded columns).
    pack_rows<P>(Q, s.qk_stride, c, dk, sc.q2[0], sc.q2[1]);
    pack_rows<P>(K, s.qk_stride, c, dk, sc.k2[0], sc.k2[1]);
    for (int part = 0; part < (P == 3 ? 2 : 1); ++part) {
      std::memset(sc.k2[part] + c * dkp, 0, sizeof(uint32_t) * size_t((nc - c) * dkp));
      panels_of_rows_t(sc.k2[part], dkp, nc, sc.kt2[part]);
    }
    pack_pairs<P, false>(S, dv, dk, dv, nullptr, dkp, sc.s2[0], sc.s2[1]);
    pack_pairs<P, false>(V, s.v_stride, c, dv, sc.bv, ncp, sc.bv2[0], sc.bv2[1]);
    pack_pairs<P, false>(K, s.qk_stride, c, dk, sc.bk, ncp, sc.bk2[0], sc.bk2[1]);
    pack_pairs<P, true>(K, s.qk_stride, c, dk, sc.to_end, ncp, sc.ks2[0], sc.ks2[1]);

    // A = strict_lower(β_i (K Kᵀ)_ij Γ_ij).
    dot_acc<P, true>(c, nc, dkp, sc.k2[0], sc.k2[1], sc.kt2[0], sc.kt2[1], sc.a, nc);
    for (int64_t i = 0; i < c; ++i)
      mask_decay_row(nc, i, _mm512_set1_ps(sc.bv[i]), sc.decay + i * kC, sc.a + i * nc);
    switch (nc / 16) {  // T = (I + A)⁻¹
      case 1: solve_unit_lower<1>(c, sc.a, sc.t); break;
      case 2: solve_unit_lower<2>(c, sc.a, sc.t); break;
      case 3: solve_unit_lower<3>(c, sc.a, sc.t); break;
      default: solve_unit_lower<4>(c, sc.a, sc.t); break;
    }
    pack_rows<P>(sc.t, nc, c, nc, sc.t2[0], sc.t2[1]);
    // U = T diag(β) V; −W = T (−diag(β e^γ) K).
    dot_acc<P, true>(c, dv, ncp, sc.t2[0], sc.t2[1], sc.bv2[0], sc.bv2[1], sc.u, dv);
    dot_acc<P, true>(c, dk, ncp, sc.t2[0], sc.t2[1], sc.bk2[0], sc.bk2[1], sc.w, dk);
    // V' = U + (−W) S, then its panels along tokens.
    pack_rows<P>(sc.w, dk, c, dk, sc.w2[0], sc.w2[1]);
    dot_acc<P>(c, dv, dkp, sc.w2[0], sc.w2[1], sc.s2[0], sc.s2[1], sc.u, dv);
    pack_pairs<P, false>(sc.u, dv, c, dv, nullptr, ncp, sc.vp2[0], sc.vp2[1]);
    // O = diag(e^γ) Q S + lower_incl_diag(Q Kᵀ ⊙ Γ) V', straight into the head's output rows.
    float* O = s.out + (t0 * s.n_v + h) * dv;  // [c, d_v], row stride n_v · d_v
    const int64_t ldo = int64_t(s.n_v) * dv;
    dot_acc<P, true>(c, dv, dkp, sc.q2[0], sc.q2[1], sc.s2[0], sc.s2[1], O, ldo);
    for (int64_t i = 0; i < c; ++i) {
      const __m512 e = _mm512_set1_ps(std::exp(sc.gam[i]));
      float* oi = O + i * ldo;
      for (int64_t d = 0; d < dv; d += 16) _mm512_storeu_ps(oi + d, _mm512_mul_ps(e, _mm512_loadu_ps(oi + d)));
    }
    dot_acc<P, true>(c, nc, dkp, sc.q2[0], sc.q2[1], sc.kt2[0], sc.kt2[1], sc.qk, nc);
    for (int64_t i = 0; i < c; ++i) mask_decay_row(nc, i + 1, _mm512_set1_ps(1.0f), sc.decay + i * kC, sc.qk + i * nc);
    pack_rows<P>(sc.qk, nc, c, nc, sc.qk2[0], sc.qk2[1]);
    dot_acc<P>(c, dv, ncp, sc.qk2[0], sc.qk2[1], sc.vp2[0], sc.vp2[1], O, ldo);
    // S ← e^{γ_C} S + (diag(e^{γ_C − γ}) K)ᵀ V'.
    const __m512 decay_all = _mm512_set1_ps(std::exp(gam_last));
    for (int64_t j = 0; j < dk * dv; j += 16) _mm512_storeu_ps(S + j, _mm512_mul_ps(decay_all, _mm512_loadu_ps(S + j)));
    dot_acc<P>(dk, dv, ncp, sc.ks2[0], sc.ks2[1], sc.vp2[0], sc.vp2[1], S, dv);
  }
}

}  // namespace

void gdn_head_chunked_bf16_avx512(const GdnSequence& s, int32_t h, int32_t parts) {
  PYPTO_ASSERT(parts == 1 || parts == 3, "bf16 parts ", parts);
  parts == 3 ? head_chunked<3>(s, h) : head_chunked<1>(s, h);
}

}  // namespace pypto::cpu
