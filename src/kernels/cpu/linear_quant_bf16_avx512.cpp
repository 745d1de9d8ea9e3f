// Quantized linears with 16-bit activations (MatmulPrecision High, Int8 and Int4 weights): x is
// split into two bf16 terms, x ≈ hi + lo with lo = bf16(x − hi) (~16 significant bits, as the bf16
// kernels at high split it), W is converted exactly to bf16 in registers, and VDPBF16PS (32 bf16
// products summed by pairs into 16 f32 lanes) multiplies them, hi then lo into the same
// accumulator. Scales are applied in f32: per column at the end (Int8), per column and group at
// the end of each group (Int4). On the panels of kernels/cpu/quant_panels.h; x comes prepared per
// row by quant_x_bf16_pairs (below) in the order the weight conversion yields.
//
//   Int8: linear_quant_bf16_q8.h (the tiles, and the two exact conversions: widening through f32
//     here, byte look-ups where the CPU has VBMI). x in natural order.
//   Int4: one 32-bit lane of a 64-byte chunk holds column c's 8 nibbles, k = 0..3 in the low and
//     k = 4..7 in the high nibbles of bytes 0..3. A nibble u moved to bits 3..6 of a 16-bit half and
//     or-ed with 0x4180 is the bf16 16 + u exactly (exponent 2^4, mantissa u / 8). Four shifts of
//     the lane and one ternary-logic each give the pairs (k0, k2), (k4, k6), (k1, k3), (k5, k7),
//     so x is stored in that order per 8 inputs. The group's sum of (16 + q) · x is corrected
//     by (16 + zero) · Σ_g x (x's sum over the group as hi + lo, computed once per row).
//
// Register tiles: Int8 4 rows × 2 panels, 1 × 4 (decode: four streams);
// Int4 R ≤ 2 rows × S ≤ 2 super-panels of 4 panels (a lone row walks two super-panels, two
// streams, as the VNNI kernel). Each output's order of operations is fixed (Int8: two lanes, each
// summing its pairs in k order, hi then lo, added at the end; Int4:
// two accumulators per group, pairs (k0,k2),(k4,k6) into the first and (k1,k3),(k5,k7) into the
// second, summed at the group's end, groups in order), whatever m, the tile or the thread: the op
// is batch-invariant.
#define PYPTO_ISA_NS avx512
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/linear_quant_bf16_q8.h"
#include "kernels/cpu/simd.h"

namespace pypto::cpu::qbf16 {
namespace {

// Software prefetch distance into L1 along each int4 weight stream (the VNNI kernels' figure: the
// hardware prefetchers stop at every 4 KiB page).
constexpr int64_t kPrefetchBytes = 3072;

// Two adjacent bf16 of x (one pair) broadcast to all 16 lanes.
inline __m512bh pair(const uint16_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return (__m512bh)_mm512_set1_epi32(v);
}

// --- Int4 ------------------------------------------------------------------------------------
// One bf16 pair vector of 16 + nibble: the lane shifted so the nibble lands on bits 3..6 of each
// 16-bit half, masked, or-ed with the exponent (ternary-logic 0xEA: (A & B) | C).
inline __m512bh magic(__m512i shifted) {
  return (__m512bh)_mm512_ternarylogic_epi32(shifted, _mm512_set1_epi32(0x00780078), _mm512_set1_epi32(0x41804180), 0xEA);
}

template <int R, int S>
void q4_super(const QuantLinearTask& t, int64_t i0, int64_t sp) {
  constexpr int V = 4;
  const int64_t G = t.groups, g = t.group, chunks = g / 8, rec = int64_t(g / 8) * 256 + 256 + 64;
  __m512 y[S][R][V];
  for (int u = 0; u < S; ++u)
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) y[u][r][v] = _mm512_setzero_ps();
  for (int64_t gi = 0; gi < G; ++gi) {
    const uint8_t* record[S];
    for (int u = 0; u < S; ++u) record[u] = t.w + ((sp + u) * G + gi) * rec;
    __m512 a0[S][R][V], a1[S][R][V];
    for (int u = 0; u < S; ++u)
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) a0[u][r][v] = a1[u][r][v] = _mm512_setzero_ps();
    const int64_t k0 = gi * g;
    const int64_t n_chunks = (t.k - k0) / 8 < chunks ? (t.k - k0) / 8 : chunks;  // k % 8 == 0
    for (int64_t ch = 0; ch < n_chunks; ++ch) {
      for (int u = 0; u < S; ++u)
        for (int v = 0; v < V; ++v) prefetch_l1(record[u] + ch * 256 + v * 64 + kPrefetchBytes);
      const int64_t off = (k0 / 8 + ch) * 16;
      for (int u = 0; u < S; ++u)
        for (int v = 0; v < V; ++v) {
          const __m512i l = _mm512_loadu_si512(record[u] + ch * 256 + v * 64);
          const __m512bh w02 = magic(_mm512_slli_epi32(l, 3)), w46 = magic(_mm512_srli_epi32(l, 1));
          const __m512bh w13 = magic(_mm512_srli_epi32(l, 5)), w57 = magic(_mm512_srli_epi32(l, 9));
          for (int r = 0; r < R; ++r) {
            const uint16_t* xr = t.xp + (i0 + r) * t.ldp + off;
            __m512 c0 = a0[u][r][v], c1 = a1[u][r][v];
            c0 = _mm512_dpbf16_ps(c0, pair(xr + 0), w02);
            c1 = _mm512_dpbf16_ps(c1, pair(xr + 4), w13);
            c0 = _mm512_dpbf16_ps(c0, pair(xr + 8), w02);
            c1 = _mm512_dpbf16_ps(c1, pair(xr + 12), w13);
            c0 = _mm512_dpbf16_ps(c0, pair(xr + 2), w46);
            c1 = _mm512_dpbf16_ps(c1, pair(xr + 6), w57);
            c0 = _mm512_dpbf16_ps(c0, pair(xr + 10), w46);
            c1 = _mm512_dpbf16_ps(c1, pair(xr + 14), w57);
            a0[u][r][v] = c0;
            a1[u][r][v] = c1;
          }
        }
    }
    // Group end: y += scale · (Σ (16 + q) x − (16 + zero) · Σ x).
    for (int u = 0; u < S; ++u) {
      const uint8_t* tail = record[u] + chunks * 256;
      for (int v = 0; v < V; ++v) {
        const __m512i zi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tail + 256 + v * 16)));
        const __m512 z = _mm512_cvtepi32_ps(_mm512_add_epi32(zi, _mm512_set1_epi32(16)));
        const __m512 s = _mm512_loadu_ps(reinterpret_cast<const float*>(tail + v * 64));
        for (int r = 0; r < R; ++r) {
          const __m512 sx = _mm512_set1_ps(t.xsumf[(i0 + r) * G + gi]);
          const __m512 val = _mm512_fnmadd_ps(z, sx, _mm512_add_ps(a0[u][r][v], a1[u][r][v]));
          y[u][r][v] = _mm512_fmadd_ps(val, s, y[u][r][v]);
        }
      }
    }
  }
  for (int u = 0; u < S; ++u)
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) {
        const int64_t c0 = (sp + u) * 64 + v * 16;
        if (c0 < t.n_out) store_out(t, i0 + r, c0, y[u][r][v]);
      }
}

// Columns [n0, n1), n0 a multiple of 64 (whole super-panels): rows two at a time per super-panel,
// an odd last row on the same super-panel while it is in L2 (as linear_quant_vnni.cpp's
// linear_cols_q4); a lone row (m = 1) takes two super-panels per pass (two streams).
void linear_cols_q4_bf16(const QuantLinearTask& t, int64_t n0, int64_t n1) {
  const int64_t sp1 = (n1 + 63) / 64;
  if (t.m == 1) {
    int64_t sp = n0 / 64;
    for (; sp + 1 < sp1; sp += 2) q4_super<1, 2>(t, 0, sp);
    if (sp < sp1) q4_super<1, 1>(t, 0, sp);
    return;
  }
  for (int64_t sp = n0 / 64; sp < sp1; ++sp) {
    for (int64_t i = 0; i + 1 < t.m; i += 2) q4_super<2, 1>(t, i, sp);
    if (t.m % 2 == 1) q4_super<1, 1>(t, t.m - 1, sp);
  }
}

// --- activations -------------------------------------------------------------------------------
// One row of x [k] → dst [ldp] bf16: per 8 inputs j .. j + 7 the 8 hi terms, then the 8 lo terms,
// each in the order the weight conversion needs (Int4: k 0,2,4,6,1,3,5,7; Int8: natural),
// zeros past k. For group > 0, xsum[g] = Σ (hi + lo) over group g, summed in double (hi + lo is exact in
// f32), rounded once.
void quant_x_bf16_pairs(const float* x, int64_t k, int64_t ldp, bool int4_order, int32_t group, uint16_t* dst,
                        float* xsum) {
  // Output slot w of a 32-slot block of two chunks: chunk w / 16, part (w / 8) % 2, input perm[w % 8].
  alignas(64) uint16_t idx[32];
  static constexpr int kPerm4[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  for (int w = 0; w < 32; ++w) {
    const int c = w / 16, part = (w / 8) % 2, s = w % 8;
    idx[w] = static_cast<uint16_t>(part * 16 + 8 * c + (int4_order ? kPerm4[s] : s));
  }
  const __m512i perm = _mm512_load_si512(idx);
  const int64_t kp = ldp / 2;  // inputs covered (a multiple of 16)
  for (int64_t j = 0; j < kp; j += 16) {
    const int n = k - j >= 16 ? 16 : k - j > 0 ? static_cast<int>(k - j) : 0;
    const __m512 v = _mm512_maskz_loadu_ps(__mmask16((1u << n) - 1u), x + j);
    const __m256i h = avx512::to_bf16_bits(v);
    const __m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    const __m256i l = avx512::to_bf16_bits(_mm512_sub_ps(v, hf));
    const __m512i hl = _mm512_inserti64x4(_mm512_castsi256_si512(h), l, 1);
    _mm512_storeu_si512(dst + 2 * j, _mm512_permutexvar_epi16(perm, hl));
  }
  if (group <= 0) return;
  const int64_t groups = (k + group - 1) / group;
  for (int64_t gi = 0; gi < groups; ++gi) {
    __m512d acc = _mm512_setzero_pd();
    const int64_t e = (gi + 1) * group < k ? (gi + 1) * group : k;
    for (int64_t j = gi * group; j < e; j += 8) {  // group % 8 == 0
      const __m512 v = _mm512_maskz_loadu_ps(__mmask16((1u << (e - j < 8 ? e - j : 8)) - 1u), x + j);
      const __m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(avx512::to_bf16_bits(v)), 16));
      const __m512 d = _mm512_sub_ps(v, hf);
      const __m512 lf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(avx512::to_bf16_bits(d)), 16));
      acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(_mm512_add_ps(hf, lf))));
    }
    xsum[gi] = static_cast<float>(_mm512_reduce_add_pd(acc));
  }
}

}  // namespace
}  // namespace pypto::cpu::qbf16

namespace pypto::cpu {
void fill_linear_quant_bf16_avx512(KernelTable& t) {
  t.linear_cols_q8_bf16 = qbf16::linear_cols_q8_bf16<qbf16::Q8Widen>;  // linear_quant_bf16_vbmi.cpp replaces it where VBMI is
  t.linear_cols_q4_bf16 = qbf16::linear_cols_q4_bf16;
  t.quant_x_bf16_pairs = qbf16::quant_x_bf16_pairs;
}
}  // namespace pypto::cpu
