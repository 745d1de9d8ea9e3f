// Quantized linears with int8 activations on AVX-512 VNNI (VPDPBUSD: 64 u8 × s8 products summed
// by fours into 16 s32 lanes per instruction), on the panels of kernels/cpu/quant_panels.h.
// Register tile: R ≤ 6 rows of x by V ≤ 4 panels (64 columns). Per quad of k (4 inputs), V loads of
// W and per row one broadcast of x's 4 bytes as a 32-bit value.
//
// Integer sums are exact, so the result of a row depends only on that row: batch-invariant, and
// equal to the AMX-INT8 path (linear_amx_int8_impl.h + q8_epilogue) bit for bit.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_tile_io.h"

namespace pypto::cpu::vnni {
namespace {

constexpr int kRows = 2;    // R of the row-pair tiles (more than kOnePassRows rows)
constexpr int kPanels = 4;  // V
// Software prefetch distance into L1 along each weight stream, in bytes. The hardware prefetchers
// stop at every 4 KiB page and run only so far ahead of a stream; 3 KiB ahead of each load measured
// best on the decode of qwen3-0.6b (Xeon with AMX, 2 threads, 4 alternating rounds: int4 median
// 77 -> 84.6 % of the read bound, int8 83.9 -> 87.9 %; 1 and 2 KiB in between, 4 and 6 KiB worse).
constexpr int64_t kPrefetchBytes = 3072;

// acc += VPDPBUSD(u8, s8), the accumulator kept in the instruction's own type (16 x s32). With
// __m512i (8 x s64) accumulators GCC 12 copied every accumulator to a new register and back on
// each step of k (the mode change around the builtin), and from 4 rows x 4 panels on spilled
// them to the stack: 24 stores per 24 products in a 6-row tile (objdump of this file).
using S32x16 = __v16si;
inline S32x16 dpbusd(S32x16 acc, __m512i u8, __m512i s8) { return (S32x16)_mm512_dpbusd_epi32((__m512i)acc, u8, s8); }

// acc += VPDPBUSD(u8, x's 4 bytes at p broadcast), x as the instruction's broadcast memory operand
// ({1to16}): GCC emits a separate VPBROADCASTD for the intrinsic form.
inline S32x16 dpbusd_x4(S32x16 acc, __m512i u8, const uint8_t* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u8), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

inline __m512i bcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Int8 epilogue for 16 columns at c0 of row i: float(acc − colsum) · (xscale · scale).
inline __m512 q8_finish(const QuantLinearTask& t, int64_t i, int64_t c0, __m512i acc) {
  const auto* colsum = static_cast<const int32_t*>(t.aux);
  const __m512i v = _mm512_sub_epi32(acc, _mm512_loadu_si512(colsum + c0));
  const __m512 s = _mm512_mul_ps(_mm512_set1_ps(t.xscale[i]), _mm512_loadu_ps(t.scale + c0));
  return _mm512_mul_ps(_mm512_cvtepi32_ps(v), s);
}

template <int R, int V>
void q8_tile(const QuantLinearTask& t, int64_t i0, int64_t p0) {
  const int64_t quads = (t.k + 3) / 4, pstride = (t.k + 63) / 64 * 1024;
  S32x16 acc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) acc[r][v] = S32x16{};
  const uint8_t* wp = t.w + p0 * pstride;
  const uint8_t* xr[R];
  for (int r = 0; r < R; ++r) xr[r] = t.xq + (i0 + r) * t.ldq;
  for (int64_t q = 0; q < quads; ++q) {
    __m512i w[V];
    for (int v = 0; v < V; ++v) prefetch_l1(wp + v * pstride + q * 64 + kPrefetchBytes);
    for (int v = 0; v < V; ++v) w[v] = _mm512_loadu_si512(wp + v * pstride + q * 64);
    for (int r = 0; r < R; ++r) {
      const __m512i x = bcast4(xr[r] + 4 * q);
      for (int v = 0; v < V; ++v) acc[r][v] = dpbusd(acc[r][v], x, w[v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      const int64_t c0 = (p0 + v) * 16;
      store_out(t, i0 + r, c0, q8_finish(t, i0 + r, c0, (__m512i)acc[r][v]));
    }
}

// Int4: S super-panels (4 panels, 64 columns each; quant_panels.h) from sp on, rows [i0, i0 + R).
// Each super-panel is one sequential stream of records; a single stream per core leaves most of
// the DRAM bandwidth unused (the hardware prefetcher runs only so far ahead of one stream:
// measured ~50 % of the read bound at m = 1), so one row walks two super-panels side by side.
// Every column's arithmetic is the same whatever S and R are, so results never depend on them.
template <int R, int S>
void q4_super(const QuantLinearTask& t, int64_t i0, int64_t sp) {
  constexpr int V = 4;
  const int64_t G = t.groups, g = t.group, chunks = g / 8, rec = int64_t(g / 8) * 256 + 256 + 64;
  const __m512i nib = _mm512_set1_epi8(0x0F), nib_hi = _mm512_set1_epi8(static_cast<char>(0xF0));
  __m512 y[S][R][V];
  for (int u = 0; u < S; ++u)
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) y[u][r][v] = _mm512_setzero_ps();
  for (int64_t gi = 0; gi < G; ++gi) {
    const uint8_t* record[S];
    for (int u = 0; u < S; ++u) record[u] = t.w + ((sp + u) * G + gi) * rec;
    // Low nibbles into acc, high nibbles left in place (16 q) into acc16: no shift per chunk; the
    // group's sum is acc + acc16 / 16 (exact: acc16 is a multiple of 16).
    S32x16 acc[S][R][V], acc16[S][R][V];
    for (int u = 0; u < S; ++u)
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < V; ++v) acc[u][r][v] = acc16[u][r][v] = S32x16{};
    const int64_t k0 = gi * g;
    const int64_t n_chunks = (t.k - k0) / 8 < chunks ? (t.k - k0) / 8 : chunks;  // k % 8 == 0
    for (int64_t ch = 0; ch < n_chunks; ++ch) {
      __m512i xl[R], xh[R];
      for (int r = 0; r < R; ++r) {
        const uint8_t* xr = t.xq + (i0 + r) * t.ldq + k0 + 8 * ch;
        xl[r] = bcast4(xr);
        xh[r] = bcast4(xr + 4);
      }
      for (int u = 0; u < S; ++u)
        for (int v = 0; v < V; ++v) prefetch_l1(record[u] + ch * 256 + v * 64 + kPrefetchBytes);
      for (int u = 0; u < S; ++u)
        for (int v = 0; v < V; ++v) {
          const __m512i b = _mm512_loadu_si512(record[u] + ch * 256 + v * 64);
          const __m512i lo = _mm512_and_si512(b, nib), hi = _mm512_and_si512(b, nib_hi);
          for (int r = 0; r < R; ++r) {
            acc[u][r][v] = dpbusd(acc[u][r][v], lo, xl[r]);
            acc16[u][r][v] = dpbusd(acc16[u][r][v], hi, xh[r]);
          }
        }
    }
    // (acc − zero · xsum) is an exact integer below 2^24, so it is computed in f32 exactly.
    for (int u = 0; u < S; ++u) {
      const uint8_t* tail = record[u] + chunks * 256;
      for (int v = 0; v < V; ++v) {
        const __m512 z = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tail + 256 + v * 16))));
        const __m512 s = _mm512_loadu_ps(reinterpret_cast<const float*>(tail + v * 64));
        for (int r = 0; r < R; ++r) {
          const __m512i a = _mm512_add_epi32((__m512i)acc[u][r][v], _mm512_srai_epi32((__m512i)acc16[u][r][v], 4));
          const __m512 val = _mm512_fnmadd_ps(z, _mm512_set1_ps(float(t.xsum[(i0 + r) * G + gi])), _mm512_cvtepi32_ps(a));
          y[u][r][v] = _mm512_fmadd_ps(val, s, y[u][r][v]);
        }
      }
    }
  }
  for (int u = 0; u < S; ++u)
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) {
        const int64_t c0 = (sp + u) * 64 + v * 16;
        if (c0 < t.n_out) store_out(t, i0 + r, c0, _mm512_mul_ps(y[u][r][v], _mm512_set1_ps(t.xscale[i0 + r])));
      }
}

// Int4, rows [i0, i0 + R) (R ≤ 8) against super-panel sp, all groups in one pass: each 64-byte
// load of weights is split into its nibbles once and feeds every row, so the weight stream from
// DRAM runs once whatever R is and the unpack is shared by the rows. Both nibbles are brought down
// to 0..15 (one shift more per load, shared) so that one accumulator per row and panel takes both
// dot products: Σ lo·x + Σ hi·x is the integer q4_super forms as acc + acc16 / 16, so the results
// are q4_super's bit for bit (the f32 epilogue of each row and column is the same, groups in the
// same order). Panels VV at a time so that the R·VV accumulators stay in registers (≤ 16 of 32:
// more made GCC spill); a group's record (≤ 2.4 KiB at g 64) stays in L1 between the VV passes;
// y lives in an L1 buffer between groups. With all 4 panels in one pass and 3 or 4 rows, x's bytes come
// as broadcast memory operands (one thread, m = 3 and 4: 0.85-0.99x the time of a separate
// VPBROADCASTD, AMD EPYC Zen 5; at 2 rows 1.03-1.07x, so not there); with VV = 2 they stay
// broadcast in registers (the memory form measured ~1.25x slower at 8 and 16 rows).
template <int R, int VV>
void q4_rows(const QuantLinearTask& t, int64_t i0, int64_t sp) {
  constexpr int V = 4;
  static_assert(V % VV == 0 && R * VV <= 16, "tile");
  const int64_t G = t.groups;
  const __m512i nib = _mm512_set1_epi8(0x0F);
  alignas(64) float ybuf[R][V][16] = {};
  for (int64_t gi = 0; gi < G; ++gi) {
    const Q4Group grp = q4_group(t, sp, gi);
    for (int vb = 0; vb < V; vb += VV) {
      S32x16 acc[R][VV];
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < VV; ++v) acc[r][v] = S32x16{};
      for (int64_t ch = 0; ch < grp.n_chunks; ++ch) {
        const uint8_t* c = grp.w + ch * 256 + vb * 64;
        for (int v = 0; v < VV; ++v) prefetch_l1(c + v * 64 + kPrefetchBytes);
        __m512i lo[VV], hi[VV];
        for (int v = 0; v < VV; ++v) {
          const __m512i b = _mm512_loadu_si512(c + v * 64);
          lo[v] = _mm512_and_si512(b, nib);
          hi[v] = _mm512_and_si512(_mm512_srli_epi16(b, 4), nib);
        }
        for (int r = 0; r < R; ++r) {
          const uint8_t* xr = t.xq + (i0 + r) * t.ldq + grp.k0 + 8 * ch;
          if constexpr (VV == V && R >= 3) {
            for (int v = 0; v < VV; ++v) acc[r][v] = dpbusd_x4(dpbusd_x4(acc[r][v], lo[v], xr), hi[v], xr + 4);
          } else {
            const __m512i xl = bcast4(xr), xh = bcast4(xr + 4);
            for (int v = 0; v < VV; ++v) acc[r][v] = dpbusd(dpbusd(acc[r][v], lo[v], xl), hi[v], xh);
          }
        }
      }
      for (int v = 0; v < VV; ++v) {
        const int pv = vb + v;
        const __m512 z = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(grp.tail + 256 + pv * 16))));
        const __m512 s = _mm512_loadu_ps(reinterpret_cast<const float*>(grp.tail + pv * 64));
        for (int r = 0; r < R; ++r) {
          const __m512 val = _mm512_fnmadd_ps(z, _mm512_set1_ps(float(t.xsum[(i0 + r) * G + gi])), _mm512_cvtepi32_ps((__m512i)acc[r][v]));
          _mm512_store_ps(ybuf[r][pv], _mm512_fmadd_ps(val, s, _mm512_load_ps(ybuf[r][pv])));
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      const int64_t c0 = sp * 64 + v * 16;
      if (c0 < t.n_out) store_out(t, i0 + r, c0, _mm512_mul_ps(_mm512_load_ps(ybuf[r][v]), _mm512_set1_ps(t.xscale[i0 + r])));
    }
}

// Runs Tile<R, V> over rows [0, m) and panels [p0, p1), R and V shrinking at the edges.
template <template <int, int> class Tile>
void run_tiles(const QuantLinearTask& t, int64_t n0, int64_t n1) {
  const int64_t p0 = n0 / 16, p1 = (n1 + 15) / 16;
  for (int64_t p = p0; p < p1; p += kPanels) {
    const int64_t v = p1 - p < kPanels ? p1 - p : kPanels;
    for (int64_t i = 0; i < t.m; i += kRows) {
      const bool two = i + 1 < t.m;
      switch (v) {
        case 4: two ? Tile<2, 4>::run(t, i, p) : Tile<1, 4>::run(t, i, p); break;
        case 3: two ? Tile<2, 3>::run(t, i, p) : Tile<1, 3>::run(t, i, p); break;
        case 2: two ? Tile<2, 2>::run(t, i, p) : Tile<1, 2>::run(t, i, p); break;
        default: two ? Tile<2, 1>::run(t, i, p) : Tile<1, 1>::run(t, i, p); break;
      }
    }
  }
}
template <int R, int V>
struct Q8Tile {
  static void run(const QuantLinearTask& t, int64_t i, int64_t p) { q8_tile<R, V>(t, i, p); }
};

// Int8 tiles by (V - 1, R - 1): R <= 6 rows by V <= 4 panels (R · V <= 24 accumulators, with the V
// weight loads and the broadcast within the 32 registers).
using Q8TileFn = void (*)(const QuantLinearTask&, int64_t, int64_t);
constexpr int kOnePassRows = 6;
template <int V, int... Rm1>
constexpr std::array<Q8TileFn, kOnePassRows> q8_row_tiles(std::integer_sequence<int, Rm1...>) {
  return {&q8_tile<Rm1 + 1, V>...};
}
constexpr auto kRowSeq = std::make_integer_sequence<int, kOnePassRows>{};
constexpr std::array<std::array<Q8TileFn, kOnePassRows>, 4> kQ8Tiles = {
    q8_row_tiles<1>(kRowSeq), q8_row_tiles<2>(kRowSeq), q8_row_tiles<3>(kRowSeq), q8_row_tiles<4>(kRowSeq)};

// Columns [n0, n1). Up to 6 rows (decode, a speculative verify of k <= 5 drafts): all rows in one
// pass over each group of 4 panels, so each weight byte streams from DRAM once and feeds every
// row; row pairs, as before, left DRAM idle while the later pairs ran from L2 (a 3- to 5-row step
// cost 1.2-1.5x a 1-row one on the 14B gate_up shape, 2 threads, AMD EPYC Zen 5). More rows keep
// row pairs over 4 panels: 8 rows x 3 panels measured ~1.3x slower per core at 16 and 512 rows
// (one thread, the 14B gate_up shape). Which tile runs never changes a result (exact integer sums).
void linear_cols_q8(const QuantLinearTask& t, int64_t n0, int64_t n1) {
  if (t.m > kOnePassRows) return run_tiles<Q8Tile>(t, n0, n1);
  const int64_t p0 = n0 / 16, p1 = (n1 + 15) / 16;
  for (int64_t p = p0; p < p1; p += kPanels) {
    const int64_t v = p1 - p < kPanels ? p1 - p : kPanels;
    kQ8Tiles[size_t(v - 1)][size_t(t.m - 1)](t, 0, p);
  }
}

// Columns [n0, n1), n0 a multiple of 64 (whole super-panels). Up to 8 rows per pass over a
// super-panel (q4_rows), further blocks of rows on the same super-panel while it is still in L2:
// one pass per row pair left the DRAM stream idle while the later pairs ran from L2 (m = 4 cost
// 1.55x m = 1 on the 14B gate_up shape, two threads, AMD EPYC Zen 5). A lone row (m = 1) takes
// two super-panels per pass instead (two streams).
void linear_cols_q4(const QuantLinearTask& t, int64_t n0, int64_t n1) {
  const int64_t sp1 = (n1 + 63) / 64;
  if (t.m == 1) {
    int64_t sp = n0 / 64;
    for (; sp + 1 < sp1; sp += 2) q4_super<1, 2>(t, 0, sp);
    if (sp < sp1) q4_super<1, 1>(t, 0, sp);
    return;
  }
  for (int64_t sp = n0 / 64; sp < sp1; ++sp) {
    int64_t i = 0;
    for (; i + 8 <= t.m; i += 8) q4_rows<8, 2>(t, i, sp);
    switch (t.m - i) {
      case 1: q4_rows<1, 4>(t, i, sp); break;
      case 2: q4_rows<2, 4>(t, i, sp); break;
      case 3: q4_rows<3, 4>(t, i, sp); break;
      case 4: q4_rows<4, 4>(t, i, sp); break;
      case 5: q4_rows<5, 2>(t, i, sp); break;
      case 6: q4_rows<6, 2>(t, i, sp); break;
      case 7: q4_rows<7, 2>(t, i, sp); break;
      default: break;
    }
  }
}

void q8_epilogue(const QuantLinearTask& t, const int32_t* acc, int64_t n0, int64_t n1) {
  for (int64_t i = 0; i < t.m; ++i)
    for (int64_t c0 = n0; c0 < n1; c0 += 16) {
      const __mmask16 mk = col_mask(c0, n1);
      const __m512i a = _mm512_maskz_loadu_epi32(mk, acc + i * t.n_out + c0);
      store_out(t, i, c0, q8_finish(t, i, c0, a));
    }
}

float quantize_row_int8(const float* x, int64_t k, int64_t ld, bool shifted, int32_t group, uint8_t* q,
                        int32_t* xsum) {
  __m512 mx = _mm512_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= k; c += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(x + c)));
  if (c < k) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_maskz_loadu_ps(__mmask16((1u << (k - c)) - 1u), x + c)));
  const float amax = _mm512_reduce_max_ps(mx);
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;  // backend.h int8_row_inv
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127), off = _mm512_set1_epi32(shifted ? 128 : 0);
  for (c = 0; c < k; c += 16) {
    const __mmask16 mk = k - c >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (k - c)) - 1u);
    // VCVTPS2DQ rounds to nearest even in the default MXCSR mode, as std::nearbyint does.
    __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk, x + c), vinv));
    v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
    _mm_mask_storeu_epi8(q + c, mk, _mm512_cvtepi32_epi8(_mm512_add_epi32(v, off)));
  }
  for (c = k; c < ld; ++c) q[c] = 0;
  if (group > 0) {
    const int64_t groups = (k + group - 1) / group;
    for (int64_t g = 0; g < groups; ++g) {
      int32_t sum = 0;
      const int64_t e = (g + 1) * group < k ? (g + 1) * group : k;
      for (int64_t j = g * group; j < e; ++j) sum += static_cast<int8_t>(q[j]);
      xsum[g] = sum;
    }
  }
  return amax;
}

}  // namespace
}  // namespace pypto::cpu::vnni

namespace pypto::cpu {
void fill_linear_quant_vnni(KernelTable& t) {
  t.linear_cols_q8 = vnni::linear_cols_q8;
  t.linear_cols_q4 = vnni::linear_cols_q4;
  t.q8_epilogue = vnni::q8_epilogue;
  t.quantize_row_int8 = vnni::quantize_row_int8;
}
}  // namespace pypto::cpu
