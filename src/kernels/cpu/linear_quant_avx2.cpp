// Quantized linears with int8 activations on AVX2 (no VPDPBUSD): the --matmul-precision medium
// path of Int8 / Int4 weights on the panels of kernels/cpu/quant_panels.h, the same contract as
// the AVX-512 VNNI kernels (linear_quant_vnni.cpp; kernel_table.h QuantLinearTask).
//
// The integer core is VPMADDUBSW (32 u8 × s8 products, pairs summed into SATURATING s16) and
// VPMADDWD by ones (s16 pairs into s32). Kept exact as follows:
//   Int8: the backend hands x as u8 = xq + 128 with xq in [-127, 127]; 255 · (-127) twice does not
//     fit s16, so x goes back to s8 (xor 0x80) and the product is taken as |w| · (x · sign(w))
//     (VPABSB, VPSIGNB): |w| ≤ 128 as u8 (a -128 weight too), |x · sign(w)| ≤ 127, so a pair sums
//     to at most 2 · 128 · 127 = 32512 < 2^15. The s32 sum is Σ xq · q, what VNNI's Σ u8 · q − colsum
//     is, so colsum is not read. (Bytes past k: x 0 → -128 after the xor, but the weight there
//     is 0 and VPSIGNB zeroes it.)
//   Int4: nibbles 0..15 are the u8 side and xq (s8) the s8 side: a pair is at most 2 · 15 · 127 =
//     3810, so the four VPMADDUBSW of two chunks (16 inputs) are added in s16 (≤ 15240) before one
//     VPMADDWD.
// The f32 epilogues are the VNNI kernel's, operation for operation (FMA is fused on both ISAs), so
// this table's results equal the AVX-512 table's bit for bit, and a row's result never depends on
// m or the column chunk (batch-invariant).
//
// A ymm holds 8 output columns: half a 16-column panel (Int8: 8 columns × one quad of k; Int4: 8
// columns × 8 inputs of one chunk, low nibbles k 0..3, high nibbles k 4..7).
#define PYPTO_ISA_NS avx2
#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_tile_io_avx2.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/quant_q4_group.h"

namespace pypto::cpu::avx2_quant {
namespace {

// Software prefetch distance along each weight stream, in bytes: the VNNI kernel's (measured there).
// On the loaded 2-core Zen 3 host 0, 1, 3 and 6 KiB were within the noise (one thread, m = 1,
// 3 alternating rounds), so the measured value stays.
constexpr int64_t kPrefetchBytes = 3072;

// ---- Int8 weights ------------------------------------------------------------------------------

// acc (8 x s32, one per column) += Σ over one quad of k of w · x: w 32 bytes (8 columns × 4), aw =
// |w|, x = the quad of xq (s8) broadcast.
inline __m256i q8_step(__m256i acc, __m256i w, __m256i aw, __m256i x) {
  const __m256i p = _mm256_maddubs_epi16(aw, _mm256_sign_epi8(x, w));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
}

// Int8: rows [i0, i0 + R) by panels [p0, p0 + V), all of k in one pass (R · 2V accumulators of the
// 16 ymm registers: R = 1 with V = 4 at decode, V = 1 with R ≤ 6 for more rows). Epilogue per 8
// columns: float(Σ xq · q) · (xscale · scale), the VNNI kernel's q8_finish (there acc − colsum).
template <int R, int V>
void q8_tile(const QuantLinearTask& t, int64_t i0, int64_t p0) {
  const int64_t quads = (t.k + 3) / 4, pstride = (t.k + 63) / 64 * 1024;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  __m256i acc[R][2 * V];
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 2 * V; ++j) acc[r][j] = _mm256_setzero_si256();
  const uint8_t* wp = t.w + p0 * pstride;
  const uint8_t* xr[R];
  for (int r = 0; r < R; ++r) xr[r] = t.xq + (i0 + r) * t.ldq;
  for (int64_t q = 0; q < quads; ++q) {
    for (int v = 0; v < V; ++v) prefetch_l1(wp + v * pstride + q * 64 + kPrefetchBytes);
    __m256i x[R];
    for (int r = 0; r < R; ++r) x[r] = _mm256_xor_si256(bcast4(xr[r] + 4 * q), flip);
    for (int v = 0; v < V; ++v)
      for (int h = 0; h < 2; ++h) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wp + v * pstride + q * 64 + h * 32));
        const __m256i aw = _mm256_abs_epi8(w);
        for (int r = 0; r < R; ++r) acc[r][2 * v + h] = q8_step(acc[r][2 * v + h], w, aw, x[r]);
      }
  }
  for (int r = 0; r < R; ++r) {
    const __m256 xs = _mm256_set1_ps(t.xscale[i0 + r]);
    for (int j = 0; j < 2 * V; ++j) {
      const int64_t c0 = p0 * 16 + j * 8;
      if (c0 >= t.n_out) continue;
      const __m256 s = _mm256_mul_ps(xs, _mm256_loadu_ps(t.scale + c0));
      store_out8(t, i0 + r, c0, _mm256_mul_ps(_mm256_cvtepi32_ps(acc[r][j]), s));
    }
  }
}

constexpr int kQ8Rows = 6;  // most rows of one Int8 pass (2 · 6 accumulators)
constexpr QuantTileFn kQ8RowTiles[kQ8Rows] = {&q8_tile<1, 1>, &q8_tile<2, 1>, &q8_tile<3, 1>,
                                              &q8_tile<4, 1>, &q8_tile<5, 1>, &q8_tile<6, 1>};
constexpr QuantTileFn kQ8OneRow[4] = {&q8_tile<1, 1>, &q8_tile<1, 2>, &q8_tile<1, 3>, &q8_tile<1, 4>};

// Columns [n0, n1): quant_tile_io_avx2.h q8_columns (blocks of 6 rows: up to 6 rows the weights
// stream from DRAM once).
void linear_cols_q8(const QuantLinearTask& t, int64_t n0, int64_t n1) { q8_columns(t, n0, n1, kQ8OneRow, kQ8RowTiles); }

// ---- Int4 weights ------------------------------------------------------------------------------

// Int4 groups: quant_q4_group.h (chunk ch, ymm y = panel y / 2, half y % 2, at w + ch · 256 + y · 32).

// The s16 partial of one chunk for one row: lo/hi the nibbles of 8 columns, xl / xh the row's
// inputs k 0..3 / 4..7 of the chunk broadcast. Each s16 lane ≤ 2 · 3810.
inline __m256i q4_chunk(__m256i lo, __m256i hi, __m256i xl, __m256i xh) {
  return _mm256_add_epi16(_mm256_maddubs_epi16(lo, xl), _mm256_maddubs_epi16(hi, xh));
}

// Int4: one group's sums acc of 8 columns of one row folded into that row's outputs y (8 f32 in
// L1), the VNNI kernel's epilogue: val = acc − zero · xsum (one FNMADD; an exact integer below
// 2^24, so exact in f32), y = val · scale + y (one FMA). Every Int4 tile folds through here.
inline void q4_fold_group(int32_t xsum, __m256i acc, __m256 zero, __m256 scale, float* y) {
  const __m256 val = _mm256_fnmadd_ps(zero, _mm256_set1_ps(float(xsum)), _mm256_cvtepi32_ps(acc));
  _mm256_store_ps(y, _mm256_fmadd_ps(val, scale, _mm256_load_ps(y)));
}

// Int4: rows [i0, i0 + R) by the ymm columns [y0, y0 + Y) of super-panel sp (y < 8, 8 columns
// each), all groups; y lives in an L1 buffer between groups. Per group and column the epilogue of
// the VNNI kernel: val = a − zero · xsum (one FNMADD), y = val · scale + y (one FMA), groups in
// order; at the end y · xscale (+ bias).
template <int R, int Y>
void q4_tile(const QuantLinearTask& t, int64_t i0, int64_t sp, int y0) {
  const int64_t G = t.groups;
  const __m256i nib = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  alignas(32) float ybuf[R][Y][8] = {};
  for (int64_t gi = 0; gi < G; ++gi) {
    const Q4Group grp = q4_group(t, sp, gi);
    __m256i acc[R][Y];
    for (int r = 0; r < R; ++r)
      for (int y = 0; y < Y; ++y) acc[r][y] = _mm256_setzero_si256();
    const uint8_t* xg[R];
    for (int r = 0; r < R; ++r) xg[r] = t.xq + (i0 + r) * t.ldq + grp.k0;
    int64_t ch = 0;
    for (; ch + 2 <= grp.n_chunks; ch += 2) {
      const uint8_t* c = grp.w + ch * 256 + y0 * 32;
      // The first pass over a super-panel streams it (512 bytes per chunk pair); later passes
      // (Y < 8) read it from L2.
      if (y0 == 0)
        for (int64_t off = 0; off < 512; off += 64) prefetch_l1(grp.w + ch * 256 + off + kPrefetchBytes);
      for (int y = 0; y < Y; ++y) {
        const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + y * 32));
        const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 256 + y * 32));
        const __m256i lo0 = _mm256_and_si256(b0, nib), hi0 = _mm256_and_si256(_mm256_srli_epi16(b0, 4), nib);
        const __m256i lo1 = _mm256_and_si256(b1, nib), hi1 = _mm256_and_si256(_mm256_srli_epi16(b1, 4), nib);
        for (int r = 0; r < R; ++r) {
          const uint8_t* xr = xg[r] + 8 * ch;
          const __m256i s = _mm256_add_epi16(q4_chunk(lo0, hi0, bcast4(xr), bcast4(xr + 4)),
                                             q4_chunk(lo1, hi1, bcast4(xr + 8), bcast4(xr + 12)));
          acc[r][y] = _mm256_add_epi32(acc[r][y], _mm256_madd_epi16(s, ones));
        }
      }
    }
    if (ch < grp.n_chunks) {  // an odd last chunk
      const uint8_t* c = grp.w + ch * 256 + y0 * 32;
      for (int y = 0; y < Y; ++y) {
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + y * 32));
        const __m256i lo = _mm256_and_si256(b, nib), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), nib);
        for (int r = 0; r < R; ++r) {
          const uint8_t* xr = xg[r] + 8 * ch;
          acc[r][y] = _mm256_add_epi32(acc[r][y], _mm256_madd_epi16(q4_chunk(lo, hi, bcast4(xr), bcast4(xr + 4)), ones));
        }
      }
    }
    for (int y = 0; y < Y; ++y) {
      const __m256 z = _mm256_cvtepi32_ps(q4_column_zeros(grp, y0 + y));
      const __m256 s = q4_column_scales(grp, y0 + y);
      for (int r = 0; r < R; ++r) q4_fold_group(t.xsum[(i0 + r) * G + gi], acc[r][y], z, s, ybuf[r][y]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int y = 0; y < Y; ++y) {
      const int64_t c0 = sp * 64 + (y0 + y) * 8;
      if (c0 < t.n_out) store_out8(t, i0 + r, c0, _mm256_mul_ps(_mm256_load_ps(ybuf[r][y]), _mm256_set1_ps(t.xscale[i0 + r])));
    }
}

// Rows [i0, i0 + R) over super-panel sp, Y ymm columns at a time (R · Y ≤ 8 accumulators): 8 / Y
// passes over all groups, the later ones from L2 (a super-panel is ~34 · k bytes at group 128).
template <int R, int Y>
void q4_rows(const QuantLinearTask& t, int64_t i0, int64_t sp) {
  for (int y0 = 0; y0 < 8; y0 += Y) q4_tile<R, Y>(t, i0, sp, y0);
}

// Int4, R = 3..8 rows [i0, i0 + R) by all 64 columns of super-panel sp in one pass over its weights:
// per group (group / 8 chunks of 256 bytes, 2 KiB at 64), the 8 ymm columns in turn, each over
// all of the group's chunks with R accumulators; the group stays in L1 between the columns, so it
// is read from memory once, and the rows' inputs are broadcast once per group into an L1 buffer
// that the products read. Before, R rows went as 8 / Y passes of Y columns over the whole
// super-panel (q4_rows, the later passes from L2). The same integer sums and the same epilogue
// per group as q4_tile (q4_fold_group): the same bits (and still the VNNI table's). AMD EPYC Zen 3, 2 threads,
// bench/kernels/quant_avx2_ab.sh ... int4 int8: 1.37-2.15x at m = 3, 1.87-2.23x at m = 4..8,
// 1.22x at 128 (prefill), 1.08x on a 30B-A3B expert (2,048 × 768) at m = 32. Groups past 128
// keep the column passes.
constexpr int64_t kQ4MaxGroupPairs = 8;  // chunk pairs of a group this tile buffers (group <= 128)
template <int R>
void q4_group_tile(const QuantLinearTask& t, int64_t i0, int64_t sp) {
  const int64_t G = t.groups;
  const __m256i nib = _mm256_set1_epi8(0x0F), ones = _mm256_set1_epi16(1);
  alignas(32) float ybuf[R][8][8] = {};
  // [chunk pair][row][4]: the row's inputs k 0..3, 4..7 of the pair's first chunk, then of its
  // second, each 4 bytes in every lane.
  if (t.group > 16 * kQ4MaxGroupPairs) return q4_rows<R, 1>(t, i0, sp);  // larger groups: column passes
  __m256i xb[kQ4MaxGroupPairs][R][4];
  for (int64_t gi = 0; gi < G; ++gi) {
    const Q4Group grp = q4_group(t, sp, gi);
    const int64_t pairs = grp.n_chunks / 2;
    for (int64_t pr = 0; pr < pairs; ++pr)
      for (int r = 0; r < R; ++r) {
        const uint8_t* xr = t.xq + (i0 + r) * t.ldq + grp.k0 + 16 * pr;
        for (int j = 0; j < 4; ++j) xb[pr][r][j] = bcast4(xr + 4 * j);
      }
    for (int y = 0; y < 8; ++y) {
      __m256i acc[R];
      for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
      for (int64_t pr = 0; pr < pairs; ++pr) {
        const uint8_t* c = grp.w + 2 * pr * 256 + y * 32;
        if (y == 0)  // the first column streams the group's chunks; the others read them from L1
          for (int64_t off = 0; off < 512; off += 64) prefetch_l1(grp.w + 2 * pr * 256 + off + kPrefetchBytes);
        const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
        const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + 256));
        const __m256i lo0 = _mm256_and_si256(b0, nib), hi0 = _mm256_and_si256(_mm256_srli_epi16(b0, 4), nib);
        const __m256i lo1 = _mm256_and_si256(b1, nib), hi1 = _mm256_and_si256(_mm256_srli_epi16(b1, 4), nib);
        for (int r = 0; r < R; ++r) {
          const __m256i(&x)[4] = xb[pr][r];
          const __m256i s = _mm256_add_epi16(q4_chunk(lo0, hi0, x[0], x[1]), q4_chunk(lo1, hi1, x[2], x[3]));
          acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(s, ones));
        }
      }
      if (grp.n_chunks % 2) {  // an odd last chunk
        const int64_t ch = grp.n_chunks - 1;
        const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(grp.w + ch * 256 + y * 32));
        const __m256i lo = _mm256_and_si256(b, nib), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), nib);
        for (int r = 0; r < R; ++r) {
          const uint8_t* xr = t.xq + (i0 + r) * t.ldq + grp.k0 + 8 * ch;
          acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(q4_chunk(lo, hi, bcast4(xr), bcast4(xr + 4)), ones));
        }
      }
      const __m256 z = _mm256_cvtepi32_ps(q4_column_zeros(grp, y));
      const __m256 s = q4_column_scales(grp, y);
      for (int r = 0; r < R; ++r) q4_fold_group(t.xsum[(i0 + r) * G + gi], acc[r], z, s, ybuf[r][y]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int y = 0; y < 8; ++y) {
      const int64_t c0 = sp * 64 + y * 8;
      if (c0 < t.n_out) store_out8(t, i0 + r, c0, _mm256_mul_ps(_mm256_load_ps(ybuf[r][y]), _mm256_set1_ps(t.xscale[i0 + r])));
    }
}

constexpr int kQ4Rows = 8;  // most rows of one Int4 pass (one row: q4_tile over all 8 columns at once)
// Two rows stay 2 passes of 4 columns (8 accumulators): the group tile measured 0.83-0.90x there.
constexpr QuantTileFn kQ4RowTiles[kQ4Rows] = {&q4_rows<1, 8>,     &q4_rows<2, 4>,    &q4_group_tile<3>,
                                              &q4_group_tile<4>, &q4_group_tile<5>, &q4_group_tile<6>,
                                              &q4_group_tile<7>, &q4_group_tile<8>};

// Columns [n0, n1): quant_tile_io_avx2.h q4_columns. A lone row reads one super-panel at a time:
// walking two side by side (as the VNNI kernel does) measured no faster here (one thread, qwen3-0.6b
// gate_up and 14B down shapes, 5 alternating rounds on the loaded Zen 3 host: within the noise), so
// the simpler walk stays.
void linear_cols_q4(const QuantLinearTask& t, int64_t n0, int64_t n1) { q4_columns(t, n0, n1, kQ4RowTiles); }

// ---- Activations ---------------------------------------------------------------------------------

// One element as the vector path quantizes it: VCVTSS2SI rounds to nearest even (default MXCSR) and
// gives INT_MIN out of range, as VCVTPS2DQ does lane by lane.
inline int32_t quant1(float x, float inv) { return _mm_cvtss_si32(_mm_set_ss(x * inv)); }

// kernel_table.h quantize_row_int8, the bytes and amax of the AVX-512 version: max|x| (exact in any
// order), inv = 127 / amax (backend.h int8_row_inv), q = clamp(round-even(x · inv), ±127) (+ 128).
float quantize_row_int8(const float* x, int64_t k, int64_t ld, bool shifted, int32_t group, uint8_t* q,
                        int32_t* xsum) {
  const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  __m256 mx = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= k; c += 8) mx = _mm256_max_ps(mx, _mm256_and_ps(_mm256_loadu_ps(x + c), absm));
  float amax = avx2::hmax(mx);
  for (; c < k; ++c) amax = std::fmax(amax, std::fabs(x[c]));
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;  // backend.h int8_row_inv
  const int32_t off = shifted ? 128 : 0;
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127), voff = _mm256_set1_epi32(off);
  const __m256i byte = _mm256_set1_epi16(0xFF), order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  auto quant8 = [&](const float* p) {
    const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(p), vinv));
    return _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(v, lo), hi), voff);
  };
  for (c = 0; c + 32 <= k; c += 32) {
    // s32 → s16 (exact: -127 .. 255), the low bytes → u8; the packs interleave 128-bit lanes, the
    // permute puts the 4-byte groups back in order.
    const __m256i a = _mm256_packs_epi32(quant8(x + c), quant8(x + c + 8));
    const __m256i b = _mm256_packs_epi32(quant8(x + c + 16), quant8(x + c + 24));
    const __m256i u = _mm256_packus_epi16(_mm256_and_si256(a, byte), _mm256_and_si256(b, byte));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + c), _mm256_permutevar8x32_epi32(u, order));
  }
  for (; c < k; ++c) {
    const int32_t v = quant1(x[c], inv);
    q[c] = static_cast<uint8_t>((v < -127 ? -127 : v > 127 ? 127 : v) + off);
  }
  if (ld > k) std::memset(q + k, 0, size_t(ld - k));
  if (group > 0) {
    // Σ of the stored bytes read as s8 per group (the unshifted xq), 16 at a time.
    const int64_t groups = (k + group - 1) / group;
    for (int64_t g = 0; g < groups; ++g) {
      const int64_t e = (g + 1) * group < k ? (g + 1) * group : k;
      int64_t j = g * group;
      __m256i s = _mm256_setzero_si256();
      for (; j + 16 <= e; j += 16) {
        const __m256i w = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(q + j)));
        s = _mm256_add_epi32(s, _mm256_madd_epi16(w, _mm256_set1_epi16(1)));
      }
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      int32_t sum = _mm_cvtsi128_si32(s4);
      for (; j < e; ++j) sum += static_cast<int8_t>(q[j]);
      xsum[g] = sum;
    }
  }
  return amax;
}

}  // namespace
}  // namespace pypto::cpu::avx2_quant

namespace pypto::cpu {
void fill_linear_quant_avx2(KernelTable& t) {
  t.linear_cols_q8 = avx2_quant::linear_cols_q8;
  t.linear_cols_q4 = avx2_quant::linear_cols_q4;
  t.quantize_row_int8 = avx2_quant::quantize_row_int8;
}
}  // namespace pypto::cpu
