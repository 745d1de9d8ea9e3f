// Quantized linears with int16 activations on AVX2: the --matmul-precision high path of Int8 / Int4
// weights where the CPU has no bf16 dot product (kernel_table.h QuantLinearTask, the Int16 formulas;
// backend.h QuantActivations::Int16). x comes quantized per row and block (quantize_row_int16 below),
// the weights are widened exactly to s16 in registers, and VPMADDWD (16 s16 × s16 products summed by
// pairs into 8 s32 lanes) gives exact integer sums per block: W4A16 / W8A16 without a bf16 unit.
//
// Why integers: the f32-activation kernel (linear_dequant_avx2.cpp) spends ~6 vector operations per
// 8 int4 weights (shift, mask, zero point, convert, scale, FMA) and decodes at a quarter of the
// int8-activation kernels' rate. Here 8 columns × 8 inputs of an int4 chunk take 3 shifts, 3 masks,
// 4 VPMADDWD and 4 adds (~4 multiply-adds per operation, against ~1.3). From cached weights (one
// row, Zen 3) this int4 kernel runs at 0.60× the int8-activation kernel's rate (8 vector multiplies
// per 128 products against its 5); from DRAM both run near the read bound. Splitting xq into two
// bytes for VPMADDUBSW (fewer operations, but 10 multiplies per 128 products) measured the same
// 0.60×, so the simpler form stays.
//
//   Int8 (quad panels, a 32-bit lane = one column's 4 inputs k 0..3 as s8): the words (k0, k2) are
//     the lane shifted left then arithmetically right by 8 per 16 bits, (k1, k3) the lane shifted
//     right by 8; x is stored per 4 inputs in the order k 0,2,1,3.
//   Int4 (chunks, a 32-bit lane = one column's 8 nibbles, byte s: k = s low, k = 4 + s high): the
//     words (k0, k2), (k4, k6), (k1, k3), (k5, k7) are the lane shifted right by 0, 4, 8, 12 per 16
//     bits and masked to 4 bits; x is stored per 8 inputs in the order k 0,2,4,6,1,3,5,7. The zero
//     point enters per block as zero · Σ xq (integer, exact).
// Bounds: |xq| ≤ 32767, |q| ≤ 128 (Int8) or 15 (Int4 nibbles), blocks of ≤ 64 inputs: a block's sum
// stays below 64 · 128 · 32767 < 2^31 and the Int4 correction below 64 · 15 · 32767, so acc − zero ·
// xsum is an exact s32. Each output is then folded in f32 per block, blocks in order, by one FMA, the
// same operations whatever m, the tile or the column chunk: batch-invariant.
#define PYPTO_ISA_NS avx2
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_panels.h"
#include "kernels/cpu/simd.h"
#include "kernels/cpu/quant_q4_group.h"
#include "kernels/cpu/quant_tile_io_avx2.h"

namespace pypto::cpu::avx2_i16 {
namespace {

// Software prefetch distance along each weight stream: the int8-activation kernels' (measured there).
constexpr int64_t kPrefetchBytes = 3072;

// ---- Int8 weights ------------------------------------------------------------------------------

// Int8: rows [i0, i0 + R) by panels [p0, p0 + V), all of k: per block of 64 inputs (16 quads) the
// s32 sums of R · 2V ymm (8 columns each), folded into y (an L1 buffer) by one FMA with the row's
// block scale; y · scale[n] at the end.
template <int R, int V>
void q8_tile(const QuantLinearTask& t, int64_t i0, int64_t p0) {
  const int64_t quads = (t.k + 3) / 4, pstride = (t.k + 63) / 64 * 1024, qb = t.xblock / 4;
  const int64_t blocks = (t.k + t.xblock - 1) / t.xblock;
  alignas(32) float ybuf[R][2 * V][8] = {};
  const uint8_t* wp = t.w + p0 * pstride;
  for (int64_t b = 0; b < blocks; ++b) {
    __m256i acc[R][2 * V];
    for (int r = 0; r < R; ++r)
      for (int j = 0; j < 2 * V; ++j) acc[r][j] = _mm256_setzero_si256();
    const int64_t q1 = (b + 1) * qb < quads ? (b + 1) * qb : quads;
    for (int64_t q = b * qb; q < q1; ++q) {
      for (int v = 0; v < V; ++v) prefetch_l1(wp + v * pstride + q * 64 + kPrefetchBytes);
      // Both halves of the panel's quad widened first, then each row's two broadcasts serve all
      // four products. (Halves in turn, as before, made the compiler keep both halves' broadcasts
      // and spill accumulators at 4 rows; this order measured 1.00-1.07x at m = 4, AMD EPYC Zen 3.)
      // The sums are exact integers, so the order of the adds changes no bits.
      for (int v = 0; v < V; ++v) {
        const uint8_t* wq = wp + v * pstride + q * 64;
        const __m256i wa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq));
        const __m256i wb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq + 32));
        const __m256i a02 = _mm256_srai_epi16(_mm256_slli_epi16(wa, 8), 8), a13 = _mm256_srai_epi16(wa, 8);
        const __m256i b02 = _mm256_srai_epi16(_mm256_slli_epi16(wb, 8), 8), b13 = _mm256_srai_epi16(wb, 8);
        for (int r = 0; r < R; ++r) {
          const int16_t* xr = t.xw + (i0 + r) * t.ldw + 4 * q;
          const __m256i x02 = bcast4(xr), x13 = bcast4(xr + 2);
          acc[r][2 * v] = _mm256_add_epi32(acc[r][2 * v], _mm256_madd_epi16(a02, x02));
          acc[r][2 * v + 1] = _mm256_add_epi32(acc[r][2 * v + 1], _mm256_madd_epi16(b02, x02));
          acc[r][2 * v] = _mm256_add_epi32(acc[r][2 * v], _mm256_madd_epi16(a13, x13));
          acc[r][2 * v + 1] = _mm256_add_epi32(acc[r][2 * v + 1], _mm256_madd_epi16(b13, x13));
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 xs = _mm256_set1_ps(t.xscale[(i0 + r) * blocks + b]);
      for (int j = 0; j < 2 * V; ++j)
        _mm256_store_ps(ybuf[r][j], _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[r][j]), xs, _mm256_load_ps(ybuf[r][j])));
    }
  }
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < 2 * V; ++j) {
      const int64_t c0 = p0 * 16 + j * 8;
      if (c0 < t.n_out) store_out8(t, i0 + r, c0, _mm256_mul_ps(_mm256_load_ps(ybuf[r][j]), _mm256_loadu_ps(t.scale + c0)));
    }
}

// Most rows of one Int8 pass: up to 8 rows (batched decode, speculative verify steps) one tile
// reads and widens each panel once; past 4 rows its accumulators spill to L1, which costs less
// than a second pass (AMD EPYC Zen 3, 2 threads, with the order above: 1.15-1.25x at m = 5, 1.09x
// at 6, 1.03-1.06x at 8; 0.97-1.02x at m = 16 and 64).
constexpr int kQ8Rows = 8;
constexpr QuantTileFn kQ8RowTiles[kQ8Rows] = {&q8_tile<1, 1>, &q8_tile<2, 1>, &q8_tile<3, 1>, &q8_tile<4, 1>,
                                              &q8_tile<5, 1>, &q8_tile<6, 1>, &q8_tile<7, 1>, &q8_tile<8, 1>};
constexpr QuantTileFn kQ8OneRow[4] = {&q8_tile<1, 1>, &q8_tile<1, 2>, &q8_tile<1, 3>, &q8_tile<1, 4>};

// Columns [n0, n1): quant_tile_io_avx2.h q8_columns (blocks of up to 8 rows).
void linear_cols_q8(const QuantLinearTask& t, int64_t n0, int64_t n1) { q8_columns(t, n0, n1, kQ8OneRow, kQ8RowTiles); }

// ---- Int4 weights ------------------------------------------------------------------------------

// Int4: one block's sums acc of 8 columns of one row folded into that row's outputs y (8 f32 in
// L1): val = acc − zero · xsum (s32, exact), y = fma(float(val), scale · xscale, y). rb: the
// row's block index into t.xsum / t.xscale. Every Int4 tile folds through here: the same bits.
inline void q4_fold_block(const QuantLinearTask& t, int64_t rb, __m256i acc, __m256i zero, __m256 scale, float* y) {
  const __m256i val = _mm256_sub_epi32(acc, _mm256_mullo_epi32(zero, _mm256_set1_epi32(t.xsum[rb])));
  const __m256 sx = _mm256_mul_ps(scale, _mm256_set1_ps(t.xscale[rb]));
  _mm256_store_ps(y, _mm256_fmadd_ps(_mm256_cvtepi32_ps(val), sx, _mm256_load_ps(y)));
}

// Int4: rows [i0, i0 + R) by the ymm columns [y0, y0 + Y) of super-panel sp (8 columns each), all
// groups, each group's blocks in order (a block of xblock inputs is xblock / 8 chunks); y lives in
// an L1 buffer between blocks. Per block and column: val = acc − zero · xsum (s32, exact), y =
// fma(float(val), scale · xscale, y).
template <int R, int Y>
void q4_tile(const QuantLinearTask& t, int64_t i0, int64_t sp, int y0) {
  const int64_t G = t.groups, cb = t.xblock / 8, blocks = (t.k + t.xblock - 1) / t.xblock;
  const __m256i nib = _mm256_set1_epi16(0x0F);
  alignas(32) float ybuf[R][Y][8] = {};
  int64_t b = 0;  // the block's index in the row (blocks nest in groups and are visited in order)
  for (int64_t gi = 0; gi < G; ++gi) {
    const Q4Group grp = q4_group(t, sp, gi);
    for (int64_t c0 = 0; c0 < grp.n_chunks; c0 += cb, ++b) {
      const int64_t c1 = c0 + cb < grp.n_chunks ? c0 + cb : grp.n_chunks;
      __m256i acc[R][Y];
      for (int r = 0; r < R; ++r)
        for (int y = 0; y < Y; ++y) acc[r][y] = _mm256_setzero_si256();
      for (int64_t ch = c0; ch < c1; ++ch) {
        const uint8_t* c = grp.w + ch * 256 + y0 * 32;
        // The first pass over a super-panel streams it; later passes (Y < 8) read it from L2.
        if (y0 == 0)
          for (int64_t off = 0; off < 256; off += 64) prefetch_l1(grp.w + ch * 256 + off + kPrefetchBytes);
        for (int y = 0; y < Y; ++y) {
          const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c + y * 32));
          const __m256i w02 = _mm256_and_si256(l, nib), w46 = _mm256_and_si256(_mm256_srli_epi16(l, 4), nib);
          const __m256i w13 = _mm256_and_si256(_mm256_srli_epi16(l, 8), nib), w57 = _mm256_srli_epi16(l, 12);
          for (int r = 0; r < R; ++r) {
            const int16_t* xr = t.xw + (i0 + r) * t.ldw + grp.k0 + 8 * ch;
            const __m256i s0 = _mm256_add_epi32(_mm256_madd_epi16(w02, bcast4(xr)), _mm256_madd_epi16(w46, bcast4(xr + 2)));
            const __m256i s1 = _mm256_add_epi32(_mm256_madd_epi16(w13, bcast4(xr + 4)), _mm256_madd_epi16(w57, bcast4(xr + 6)));
            acc[r][y] = _mm256_add_epi32(acc[r][y], _mm256_add_epi32(s0, s1));
          }
        }
      }
      for (int y = 0; y < Y; ++y) {
        const __m256i z = q4_column_zeros(grp, y0 + y);
        const __m256 s = q4_column_scales(grp, y0 + y);
        for (int r = 0; r < R; ++r) q4_fold_block(t, (i0 + r) * blocks + b, acc[r][y], z, s, ybuf[r][y]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int y = 0; y < Y; ++y) {
      const int64_t c0 = sp * 64 + (y0 + y) * 8;
      if (c0 < t.n_out) store_out8(t, i0 + r, c0, _mm256_load_ps(ybuf[r][y]));
    }
}

// Rows [i0, i0 + R) over super-panel sp, Y ymm columns at a time: 8 / Y passes over all groups, the
// later ones from L2 (one row: Y = 8, one pass; more rows go as q4_block_tile below).
template <int R, int Y>
void q4_rows(const QuantLinearTask& t, int64_t i0, int64_t sp) {
  for (int y0 = 0; y0 < 8; y0 += Y) q4_tile<R, Y>(t, i0, sp, y0);
}

// Int4, R >= 2 rows [i0, i0 + R) by all 64 columns of super-panel sp in one pass over its weights:
// per block of xblock inputs (xblock / 8 chunks of 256 bytes, 2 KiB at 64), the 8 ymm columns in
// turn, each over all of the block's chunks with R accumulators (R + 4 + 4 ymm: no spills up to 8
// rows); the block stays in L1 between the columns, so it is read from memory once. Before, R rows
// went as 8 / Y passes of Y columns over the whole super-panel (q4_rows: the later passes from L2,
// 2R · Y accumulators and the rows' broadcasts spilling). The same integer sums and the same f32
// fold per block as q4_tile (q4_fold_block: the same bits). AMD EPYC Zen 3, 2 threads, bench/kernels/
// quant_avx2_ab.sh: 1.35-1.49x at m = 3..5, 1.21x at 8, 1.09-1.11x at 128 (prefill), 0.98x at 2.
// The rows' x pairs are broadcast once per block into an L1 buffer (8 KiB at 8 rows) that the
// 8 columns' products read: 1.07-1.11x at m = 8..128 over broadcasting per column. (Broadcasting
// x by 128 bits and shuffling each pair out measured 0.93-1.01x.)
constexpr int64_t kQ4MaxBlockChunks = 8;  // chunks of one activation block (int16_act_block <= 64)
template <int R>
void q4_block_tile(const QuantLinearTask& t, int64_t i0, int64_t sp) {
  const int64_t G = t.groups, cb = t.xblock / 8;
  const int64_t blocks = (t.k + t.xblock - 1) / t.xblock;
  const __m256i nib = _mm256_set1_epi16(0x0F);
  alignas(32) float ybuf[R][8][8] = {};
  __m256i xb[kQ4MaxBlockChunks][R][4];  // [chunk][row][pair]: x pairs (k 0,2 | 4,6 | 1,3 | 5,7) in every lane
  PYPTO_ASSERT(cb <= kQ4MaxBlockChunks, "xblock ", t.xblock);
  int64_t b = 0;  // the block's index in the row (blocks nest in groups and are visited in order)
  for (int64_t gi = 0; gi < G; ++gi) {
    const Q4Group grp = q4_group(t, sp, gi);
    for (int64_t c0 = 0; c0 < grp.n_chunks; c0 += cb, ++b) {
      const int64_t c1 = c0 + cb < grp.n_chunks ? c0 + cb : grp.n_chunks;
      // The rows' broadcast pairs of the block, once for the 8 columns (madd reads them from L1).
      for (int64_t ch = c0; ch < c1; ++ch)
        for (int r = 0; r < R; ++r) {
          const int16_t* xr = t.xw + (i0 + r) * t.ldw + grp.k0 + 8 * ch;
          for (int j = 0; j < 4; ++j) xb[ch - c0][r][j] = bcast4(xr + 2 * j);
        }
      for (int y = 0; y < 8; ++y) {
        __m256i acc[R];
        for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_si256();
        for (int64_t ch = c0; ch < c1; ++ch) {
          if (y == 0)  // the first column streams the block's chunks; the others read them from L1
            for (int64_t off = 0; off < 256; off += 64) prefetch_l1(grp.w + ch * 256 + off + kPrefetchBytes);
          const __m256i l = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(grp.w + ch * 256 + y * 32));
          const __m256i w02 = _mm256_and_si256(l, nib), w46 = _mm256_and_si256(_mm256_srli_epi16(l, 4), nib);
          const __m256i w13 = _mm256_and_si256(_mm256_srli_epi16(l, 8), nib), w57 = _mm256_srli_epi16(l, 12);
          const __m256i (*xc)[4] = xb[ch - c0];
          for (int r = 0; r < R; ++r) {
            const __m256i s0 = _mm256_add_epi32(_mm256_madd_epi16(w02, xc[r][0]), _mm256_madd_epi16(w46, xc[r][1]));
            const __m256i s1 = _mm256_add_epi32(_mm256_madd_epi16(w13, xc[r][2]), _mm256_madd_epi16(w57, xc[r][3]));
            acc[r] = _mm256_add_epi32(acc[r], _mm256_add_epi32(s0, s1));
          }
        }
        const __m256i z = q4_column_zeros(grp, y);
        const __m256 s = q4_column_scales(grp, y);
        for (int r = 0; r < R; ++r) q4_fold_block(t, (i0 + r) * blocks + b, acc[r], z, s, ybuf[r][y]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int y = 0; y < 8; ++y) {
      const int64_t c0 = sp * 64 + y * 8;
      if (c0 < t.n_out) store_out8(t, i0 + r, c0, _mm256_load_ps(ybuf[r][y]));
    }
}

constexpr int kQ4Rows = 8;  // most rows of one Int4 pass (one row: q4_tile over all 8 columns at once)
constexpr QuantTileFn kQ4RowTiles[kQ4Rows] = {&q4_rows<1, 8>,     &q4_block_tile<2>, &q4_block_tile<3>,
                                              &q4_block_tile<4>, &q4_block_tile<5>, &q4_block_tile<6>,
                                              &q4_block_tile<7>, &q4_block_tile<8>};

// Columns [n0, n1): quant_tile_io_avx2.h q4_columns (blocks of 8 rows per super-panel).
void linear_cols_q4(const QuantLinearTask& t, int64_t n0, int64_t n1) { q4_columns(t, n0, n1, kQ4RowTiles); }

// ---- Activations ---------------------------------------------------------------------------------

// kernel_table.h quantize_row_int16 (backend.h int16_block_inv): per block max|x| (exact in any
// order), inv = 32767 / amax, xq = clamp(round-even(x · inv), ±32767) (VCVTPS2DQ under the default
// MXCSR), stored 8 at a time in kernel order, zeros past k.
void quantize_row_int16(const float* x, int64_t k, int64_t ld, bool int4_order, int32_t block, int16_t* q,
                        float* scale, int32_t* xsum) {
  const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i order = int4_order ? _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7) : _mm256_setr_epi32(0, 2, 1, 3, 4, 6, 5, 7);
  const __m256i lo = _mm256_set1_epi32(-32767), hi = _mm256_set1_epi32(32767);
  // The 8 inputs at c (zeros past k).
  auto load8 = [&](int64_t c) {
    if (c + 8 <= k) return _mm256_loadu_ps(x + c);
    return _mm256_maskload_ps(x + c, _mm256_cmpgt_epi32(_mm256_set1_epi32(int32_t(k - c)), lane));
  };
  const int64_t blocks = (k + block - 1) / block;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t c0 = b * block, c1 = c0 + block < k ? c0 + block : k;
    __m256 mx = _mm256_setzero_ps();
    for (int64_t c = c0; c < c1; c += 8) mx = _mm256_max_ps(mx, _mm256_and_ps(load8(c), absm));
    const float amax = avx2::hmax(mx);
    scale[b] = int16_block_scale(amax);
    const __m256 inv = _mm256_set1_ps(int16_block_inv(amax));
    __m256i sum = _mm256_setzero_si256();
    for (int64_t c = c0; c < c1; c += 8) {  // block % 8 == 0: 8 inputs never straddle two blocks
      __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(load8(c), inv));
      v = _mm256_permutevar8x32_epi32(_mm256_min_epi32(_mm256_max_epi32(v, lo), hi), order);
      sum = _mm256_add_epi32(sum, v);
      // s32 → s16 (exact within ±32767): packs interleaves 128-bit lanes, so pack with itself and
      // take the 64-bit quarters 0 and 2.
      const __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(v, v), 0x08);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(q + c), _mm256_castsi256_si128(p));
    }
    if (xsum) {
      __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
      s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
      xsum[b] = _mm_cvtsi128_si32(s4);
    }
  }
  const int64_t done = (k + 7) / 8 * 8;
  if (ld > done) std::memset(q + done, 0, size_t(ld - done) * sizeof(int16_t));
}

}  // namespace
}  // namespace pypto::cpu::avx2_i16

namespace pypto::cpu {
void fill_linear_quant_i16_avx2(KernelTable& t) {
  t.linear_cols_q8_i16 = avx2_i16::linear_cols_q8;
  t.linear_cols_q4_i16 = avx2_i16::linear_cols_q4;
  t.quantize_row_int16 = avx2_i16::quantize_row_int16;
}
}  // namespace pypto::cpu
