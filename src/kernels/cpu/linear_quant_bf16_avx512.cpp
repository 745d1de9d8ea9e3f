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
//   Int4: linear_quant_bf16_q4.h (the tiles and the nibble → bf16 conversion: shifts and one
//     ternary-logic per 32 weights). x in the order k 0,2,4,6,1,3,5,7 per 8 inputs; the group's
//     sum of (16 + q) · x is corrected by (16 + zero) · Σ_g x (x's sum over the group as hi + lo,
//     computed once per row).
//
// Register tiles: Int8 4 rows × 2 panels, 1 × 4 (decode: four streams);
// Int4 R ≤ 2 rows × S ≤ 2 super-panels of 4 panels (a lone row walks two super-panels, two
// streams, as the VNNI kernel), and from 4 rows on 8 rows × 1 panel or 4 rows × 2 panels per
// pass (q4_rows: each weight vector converted once for 4 or 8 rows). Each output's order of
// operations is fixed (Int8: two lanes, each summing its pairs in k order, hi then lo, added at
// the end; Int4: two accumulators per group, pairs (k0,k2),(k4,k6) into the first and
// (k1,k3),(k5,k7) into the second, summed at the group's end, groups in order), whatever m, the
// tile or the thread: the op is batch-invariant.
#define PYPTO_ISA_NS avx512
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/linear_quant_bf16_q4.h"
#include "kernels/cpu/linear_quant_bf16_q8.h"
#include "kernels/cpu/simd.h"

namespace pypto::cpu::qbf16 {
namespace {

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
