#pragma once
// Int4 weights with bf16-pair activations (MatmulPrecision High, W4A16): the nibble → bf16
// conversion and the register tiles. A 64-byte chunk of an Int4 record (quant_panels.h) holds in
// 32-bit lane c column c's 8 nibbles, byte s the inputs k = s (low nibble) and k = 4 + s (high
// nibble). A nibble u moved to bits 3..6 of a 16-bit word and or-ed with 0x4180 is the bf16 16 + u
// exactly (exponent 2^4, mantissa u / 8); four shifts of the lane (left 3, right 1, 5, 9) and one
// ternary-logic each give the four vectors whose lane c holds column c's pair
//   w02 = (k0, k2), w46 = (k4, k6), w13 = (k1, k3), w57 = (k5, k7)
// (16-bit word h of the lane from byte 2h), so x is stored in the order k 0,2,4,6,1,3,5,7 per 8
// inputs (quant_x_bf16_pairs). The group's sum of (16 + q) · x is corrected by (16 + zero) · Σ_g x.
// Table look-ups in place of the shifts (VPERMW of a 32-entry bf16 table: 3 shifts + 4 permutes;
// masked VPERMB: the same plus register copies; VPERMW of two byte-offset loads for w02 / w13 + 2
// shifts for the others) measured no faster on Zen 5 (status.md, issue 33): the permutes take the
// vector ports the shifts take, and the prefetch distance, not the conversion, set the rate.
// Included by ISA translation units only, hence the anonymous namespace.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_tile_io.h"

namespace pypto::cpu::qbf16 {
namespace {

// Software prefetch distance into L1 along each weight stream: the hardware prefetchers stop at
// every 4 KiB page. At one row (AMD EPYC Zen 5, 0.6b shapes, alternating runs, high / medium
// median calls) 4.5 KiB measured 97–99 % against 90–95 % at 3 KiB (the VNNI kernels' figure),
// 93–95 % at 4 KiB, 96 % at 5 KiB, 92–94 % at 6 KiB and 74–93 % at 2 KiB: this kernel spends
// more instructions per byte than the VNNI one, so its out-of-order window reaches less far ahead.
constexpr int64_t kQ4PrefetchBytes = 4608;

struct Q4Words {
  __m512bh w02, w46, w13, w57;
};

// (A & B) | C by ternary-logic 0xEA: the nibble on bits 3..6 of each word, the exponent or-ed in.
inline __m512bh q4_magic(__m512i shifted) {
  return (__m512bh)_mm512_ternarylogic_epi32(shifted, _mm512_set1_epi32(0x00780078), _mm512_set1_epi32(0x41804180), 0xEA);
}

// The 64-byte chunk at p → its four bf16 pair vectors.
inline Q4Words q4_to_bf16(const uint8_t* p) {
  const __m512i l = _mm512_loadu_si512(p);
  return {q4_magic(_mm512_slli_epi32(l, 3)), q4_magic(_mm512_srli_epi32(l, 1)), q4_magic(_mm512_srli_epi32(l, 5)),
          q4_magic(_mm512_srli_epi32(l, 9))};
}

// Two adjacent bf16 of x (one pair) broadcast to all 16 lanes.
inline __m512bh pair(const uint16_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return (__m512bh)_mm512_set1_epi32(v);
}

// acc += VDPBF16PS(w, the pair at p broadcast). In q4_rows<R, 1> (each pair used once) the pair is
// the instruction's broadcast memory operand ({1to16}; GCC emits a separate VPBROADCASTD per
// product for the intrinsic form); with VV > 1 panels the register broadcast serves VV products
// (the memory form measured ~1.25x slower at m = 4, one thread, AMD EPYC Zen 5).
template <int VV>
inline __m512 dp_pair(__m512 acc, __m512bh w, const uint16_t* p) {
  if constexpr (VV > 1) return _mm512_dpbf16_ps(acc, w, pair(p));
  asm("vdpbf16ps %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(p)));
  return acc;
}

// Rows [i0, i0 + R) × super-panels [sp, sp + S) (4 panels of 16 columns each): per group two
// accumulators per output, pairs (k0,k2),(k4,k6) into the first and (k1,k3),(k5,k7) into the
// second, hi then lo, summed at the group's end and scaled; groups in order.
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
        for (int v = 0; v < V; ++v) prefetch_l1(record[u] + ch * 256 + v * 64 + kQ4PrefetchBytes);
      const int64_t off = (k0 / 8 + ch) * 16;
      for (int u = 0; u < S; ++u)
        for (int v = 0; v < V; ++v) {
          const Q4Words w = q4_to_bf16(record[u] + ch * 256 + v * 64);
          for (int r = 0; r < R; ++r) {
            const uint16_t* xr = t.xp + (i0 + r) * t.ldp + off;
            __m512 c0 = a0[u][r][v], c1 = a1[u][r][v];
            c0 = _mm512_dpbf16_ps(c0, pair(xr + 0), w.w02);
            c1 = _mm512_dpbf16_ps(c1, pair(xr + 4), w.w13);
            c0 = _mm512_dpbf16_ps(c0, pair(xr + 8), w.w02);
            c1 = _mm512_dpbf16_ps(c1, pair(xr + 12), w.w13);
            c0 = _mm512_dpbf16_ps(c0, pair(xr + 2), w.w46);
            c1 = _mm512_dpbf16_ps(c1, pair(xr + 6), w.w57);
            c0 = _mm512_dpbf16_ps(c0, pair(xr + 10), w.w46);
            c1 = _mm512_dpbf16_ps(c1, pair(xr + 14), w.w57);
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

// Rows [i0, i0 + R) × super-panel sp, panels VV at a time: each 64-byte chunk is converted to its
// four bf16 pair vectors once and feeds all R rows (q4_super<2, 1> converts it once per 2 rows).
// R · VV ≤ 8: the 2 · R · VV accumulators (≥ 12 in flight cover VDPBF16PS's latency at 2 a cycle)
// and the 4 · VV converted vectors stay in registers, x's pairs come as broadcast memory operands;
// y lives in an L1 buffer between groups, and a group's record (≤ 2.4 KiB at g 64) stays in L1
// between the V / VV passes. Each output's operations are q4_super's in the same order (per chunk
// the same four products into each of its two accumulators, the same group-end correction and
// scale, groups in order): the results are q4_super's bit for bit, whatever R and VV.
template <int R, int VV>
void q4_rows(const QuantLinearTask& t, int64_t i0, int64_t sp) {
  constexpr int V = 4;
  static_assert(V % VV == 0 && R * VV <= 8, "tile");
  const int64_t G = t.groups;
  alignas(64) float ybuf[R][V][16] = {};
  for (int64_t gi = 0; gi < G; ++gi) {
    const Q4Group grp = q4_group(t, sp, gi);
    for (int vb = 0; vb < V; vb += VV) {
      __m512 a0[R][VV], a1[R][VV];
      for (int r = 0; r < R; ++r)
        for (int v = 0; v < VV; ++v) a0[r][v] = a1[r][v] = _mm512_setzero_ps();
      for (int64_t ch = 0; ch < grp.n_chunks; ++ch) {
        const uint8_t* c = grp.w + ch * 256 + vb * 64;
        for (int v = 0; v < VV; ++v) prefetch_l1(c + v * 64 + kQ4PrefetchBytes);
        Q4Words w[VV];
        for (int v = 0; v < VV; ++v) w[v] = q4_to_bf16(c + v * 64);
        const int64_t off = (grp.k0 / 8 + ch) * 16;
        for (int r = 0; r < R; ++r) {
          const uint16_t* xr = t.xp + (i0 + r) * t.ldp + off;
          // The weights first and x's pair second (a broadcast memory operand); VDPBF16PS's two
          // products per lane are exact in f32, so the operand order leaves every sum unchanged.
          for (int v = 0; v < VV; ++v) {
            __m512 c0 = a0[r][v], c1 = a1[r][v];
            c0 = dp_pair<VV>(c0, w[v].w02, xr + 0);
            c1 = dp_pair<VV>(c1, w[v].w13, xr + 4);
            c0 = dp_pair<VV>(c0, w[v].w02, xr + 8);
            c1 = dp_pair<VV>(c1, w[v].w13, xr + 12);
            c0 = dp_pair<VV>(c0, w[v].w46, xr + 2);
            c1 = dp_pair<VV>(c1, w[v].w57, xr + 6);
            c0 = dp_pair<VV>(c0, w[v].w46, xr + 10);
            c1 = dp_pair<VV>(c1, w[v].w57, xr + 14);
            a0[r][v] = c0;
            a1[r][v] = c1;
          }
        }
      }
      // Group end, as q4_super: y += scale · (Σ (16 + q) x − (16 + zero) · Σ x).
      for (int v = 0; v < VV; ++v) {
        const int pv = vb + v;
        const __m512i zi = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(grp.tail + 256 + pv * 16)));
        const __m512 z = _mm512_cvtepi32_ps(_mm512_add_epi32(zi, _mm512_set1_epi32(16)));
        const __m512 s = _mm512_loadu_ps(reinterpret_cast<const float*>(grp.tail + pv * 64));
        for (int r = 0; r < R; ++r) {
          const __m512 sx = _mm512_set1_ps(t.xsumf[(i0 + r) * G + gi]);
          const __m512 val = _mm512_fnmadd_ps(z, sx, _mm512_add_ps(a0[r][v], a1[r][v]));
          _mm512_store_ps(ybuf[r][pv], _mm512_fmadd_ps(val, s, _mm512_load_ps(ybuf[r][pv])));
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      const int64_t c0 = sp * 64 + v * 16;
      if (c0 < t.n_out) store_out(t, i0 + r, c0, _mm512_load_ps(ybuf[r][v]));
    }
}

// Columns [n0, n1), n0 a multiple of 64 (whole super-panels). Per super-panel, blocks of 8 rows
// (q4_rows<8, 1>), then one of 4 (q4_rows<4, 2>), then the last 1 to 3 rows two at a time
// (q4_super<2, 1>, y in registers) and an odd last one, all on the same super-panel while it is in
// L2 (as linear_quant_vnni.cpp's linear_cols_q4); a lone row (m = 1) takes two super-panels per
// pass (two streams).
void linear_cols_q4_bf16(const QuantLinearTask& t, int64_t n0, int64_t n1) {
  const int64_t sp1 = (n1 + 63) / 64;
  if (t.m == 1) {
    int64_t sp = n0 / 64;
    for (; sp + 1 < sp1; sp += 2) q4_super<1, 2>(t, 0, sp);
    if (sp < sp1) q4_super<1, 1>(t, 0, sp);
    return;
  }
  for (int64_t sp = n0 / 64; sp < sp1; ++sp) {
    int64_t i = 0;
    for (; i + 8 <= t.m; i += 8) q4_rows<8, 1>(t, i, sp);
    if (i + 4 <= t.m) {
      q4_rows<4, 2>(t, i, sp);
      i += 4;
    }
    for (; i + 1 < t.m; i += 2) q4_super<2, 1>(t, i, sp);
    if (i < t.m) q4_super<1, 1>(t, i, sp);
  }
}

}  // namespace
}  // namespace pypto::cpu::qbf16
