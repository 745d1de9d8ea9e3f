#pragma once
// Causal paged attention with online softmax, compiled once per ISA (include after simd.h).
//
// One task = the query rows [t0, t1) of one sequence × the query heads of one KV head (GQA: query
// head h reads KV head h / group). The task walks the sequence's keys block by block through its
// block table; each cache block is widened to f32 once (K and V, [block_size, head_dim]) and then
// used by every query-head of the task. A query at position p only sees keys 0..p. An 8-bit cache
// (int8 / fp8 e4m3, kernels/kv_quant.h) is read as codes and dequantized in registers on the way
// into that block tile (code · the row's scale): the cache itself is never widened, the bytes
// streamed from memory are 1 per element plus 4 per row.
//
// Online softmax (no [T, T] matrix): per query-head keep the running max m, the running
// denominator l = Σ e^(s - m) and the running numerator acc = Σ e^(s - m) v. For a new block of
// scores s_j:  m' = max(m, max_j s_j),  α = e^(m - m'),  l' = α l + Σ_j e^(s_j - m'),
// acc' = α acc + Σ_j e^(s_j - m') v_j;  finally out = acc / l.
//
// Batch invariance: a query's arithmetic depends only on its own q, its position and the cache
// contents: blocks are visited in order, a block contributes keys [block start, min(block end,
// p + 1)), scores use the fixed-order dot product, sums run over j in increasing order. Which
// other queries share the task, or how the prompt was chunked, never enters.
//
// attention_generic serves any head_dim. attention_fast<HC> (head_dim = HC · L: 64 / 128 / 256
// with AVX-512, L = kLanes) walks each block in key groups of L keys ([kb0 + iL, ...) within the
// block) and gives every query-head, for every group it sees, this one sequence of operations:
//   score s_j = scale · tree(chain_0 .. chain_L-1), chain_r = Σ_c q[r + cL]·k_j[r + cL] by FMA
//     in increasing c from 0, tree = reduce_lanes' fixed pairing;
//   keys j >= nk (past the query's position, or past the cache) get s_j = -inf;
//   m' = m > max_j s_j ? m : max_j s_j (max in hmax's order), α = vexp(m - m'),
//   p_j = vexp(s_j - m'), l' = l·α + Σ_j p_j (in hsum's fixed tree);
//   acc = α·acc, then acc += p_j·v_j by FMA for j = 0 .. nk-1 only (keys past nk are skipped,
//     not added with probability 0).
// Two implementations of that sequence, bit-identical, chosen per block by how many query-heads
// of the task see the block (a choice that therefore never changes a result):
//  * row path (fewer than kAttnColsMin, e.g. decode): one query-head at a time, q in
//    registers; lane r of the accumulator of key j is chain_r, reduce_lanes() sums the chains of
//    L keys at once; softmax on one vector of L scores (hmax, exp_scalar, hsum).
//  * column path (prefill, chunks, wide GQA groups): the task's query-heads are transposed once
//    into vectors of L query-heads ([head_dim][L]); scores_cols computes the same chains with
//    query-heads in the lanes — a broadcast key element times a query vector per FMA, a register
//    tile of kAttnTileKeys keys × kAttnTileQv query vectors, so each load feeds 1.3-2 FMAs — and
//    adds them in the same tree by vertical adds, no horizontal reduction. softmax_cols then runs
//    the softmax for L query-heads at once, key by key, with the max and the sum over keys done
//    as the same pairings as hmax / hsum and the same vexp lane by lane; lanes of query-heads
//    that see none of the group keep their state. P·V shares each value-row load among up to
//    kAttnTile query-heads that see the same number of keys (pv_update: the same FMA order for
//    any number of them).
// Lanes are independent in every vertical operation, so neither which lane a query-head lands
// in nor its companions (other rows, padding lanes, heads) can change its bits; masked keys are
// replaced by -inf with a select (their content, even NaN, never enters), and cache rows past
// the block's end are never read (zeros stand in for them).
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/kv_quant_simd.h"

namespace pypto::cpu::PYPTO_ISA_NS {

inline int64_t round_lanes(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

inline int64_t attention_scratch_floats(int32_t block_size, int32_t head_dim) {
  // Q = kAttentionMaxQueries. Generic: K, V blocks [bs, ldk] + scores [round_lanes(bs)] + 2 × [Q].
  // Fast: K, V blocks [round_lanes(bs), hd] + transposed queries [Q + L, hd] + scores [2, L, L] +
  // alpha [2, L] + 2 × [Q + L] + [L].
  const int64_t ld = round_lanes(head_dim), slots = kAttentionMaxQueries + kLanes;
  // Folded segments: + [Q + L, hd] + 2 × [Q + L]. Fast: running numerators + [Q, hd].
  return 2 * round_lanes(block_size) * ld + slots * ld + 2 * kLanes * kLanes + 2 * kLanes + 2 * slots + kLanes +
         round_lanes(block_size) + slots * ld + 2 * slots + static_cast<int64_t>(kAttentionMaxQueries) * ld;
}

// Σ_e a[e]·b[e] over n elements, lane-then-tree order.
inline float dot_f32(const float* a, const float* b, int32_t n) {
  vf acc = vzero();
  int32_t e = 0;
  for (; e + kLanes <= n; e += kLanes) acc = vfma(vload(a + e), vload(b + e), acc);
  if (e < n) acc = vfma(vload_n(a + e, n - e), vload_n(b + e, n - e), acc);
  return hsum(acc);
}

inline float exp_scalar(float x) {
  float out[kLanes];
  vstore(out, vexp(vset1(x)));
  return out[0];
}

// Segments (flash decoding). The keys of every query are taken in fixed segments of
// kAttnSegmentBlocks cache blocks ([s · S, (s + 1) · S), S = kAttnSegmentBlocks · block_size keys,
// whatever the thread count or batch): the online softmax above runs within a segment from
// (m, l, acc) = (-inf, 0, 0), and the segments' (m, l, acc) are folded in segment order into a
// total (M, Λ, A) by fold_segment; out = A / Λ. A decode query may then have its segments computed
// by different threads (partials, attention_decode_split.h) and folded afterwards in the same
// order by the same function, and so gives the bits a prefill row (folding in place as its task
// walks the blocks) gives: the split never enters the arithmetic.
constexpr int32_t kAttnSegmentBlocks = kAttentionSegmentBlocks;

// (M, Λ, A) ← (M, Λ, A) ⊕ (m, l, a): M' = max(M, m), Λ' = Λ·e^(M-M') + l·e^(m-M'),
// A' = A·e^(M-M') + a·e^(m-M') (A, a: [hd]). On the first fold (M = -inf, Λ = 0, A = 0) the first
// terms are 0.
inline void fold_segment(float& M, float& Ls, float* A, float m, float l, const float* a, int32_t hd) {
  const float Mn = M > m ? M : m;
  const float fa = exp_scalar(M - Mn), fb = exp_scalar(m - Mn);
  Ls = Ls * fa + l * fb;
  M = Mn;
  const vf va = vset1(fa), vb = vset1(fb);
  for (int32_t e = 0; e < hd; e += kLanes) {
    const int n = hd - e < kLanes ? hd - e : kLanes;
    vstore_n(A + e, vfma(vload_n(a + e, n), vb, vmul(vload_n(A + e, n), va)), n);
  }
}

// A query-head's last segment (m, l, o) folded into its total, then o = A / Λ.
inline void finish_query(float& M, float& Ls, float* A, float m, float l, float* o, int32_t hd) {
  fold_segment(M, Ls, A, m, l, o, hd);
  const vf inv = vset1(1.0f / Ls);
  for (int32_t e = 0; e < hd; e += kLanes) {
    const int n = hd - e < kLanes ? hd - e : kLanes;
    vstore_n(o + e, vmul(vload_n(A + e, n), inv), n);
  }
}

// A query-head's segment (m, l, o) folded into its total and restarted: at a segment boundary.
inline void next_segment(float& M, float& Ls, float* A, float& m, float& l, float* o, int32_t hd) {
  fold_segment(M, Ls, A, m, l, o, hd);
  m = -INFINITY;
  l = 0.0f;
  for (int32_t e = 0; e < hd; e += kLanes) {
    const int n = hd - e < kLanes ? hd - e : kLanes;
    vstore_n(o + e, vzero(), n);
  }
}

inline void attention_generic(const AttentionTask& t, float* scratch) {
  const KvCacheLayer& c = *t.cache;
  const AttentionBatch& b = *t.batch;
  const int32_t hd = c.head_dim, bs = c.block_size;
  const int32_t group = t.n_heads / c.n_kv_heads;
  const int32_t q0 = b.query_start[t.seq], q1 = b.query_start[t.seq + 1];
  const int32_t first_pos = b.context_len[t.seq] - (q1 - q0);  // position of query row q0
  const int32_t* table = b.block_tables + static_cast<int64_t>(t.seq) * b.max_blocks_per_seq;
  const int32_t nq = (t.t1 - t.t0) * group;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t ldk = round_lanes(hd);

  float* kf = scratch;                        // [bs, ldk]  this block's keys, f32
  float* vfb = kf + bs * ldk;                 // [bs, ldk]  this block's values, f32
  float* s = vfb + bs * ldk;                  // [round_lanes(bs)]  scores → probabilities
  float* run_max = s + round_lanes(bs);       // [nq]
  float* run_sum = run_max + kAttentionMaxQueries; // [nq]
  float* tot_max = run_sum + kAttentionMaxQueries;  // [nq]  folded segments (fold_segment)
  float* tot_sum = tot_max + kAttentionMaxQueries;  // [nq]
  float* tot_acc = tot_sum + kAttentionMaxQueries;  // [nq, ldk]

  // acc lives in `out` (this task's rows are written by no one else).
  for (int32_t qi = 0; qi < nq; ++qi) {
    run_max[qi] = tot_max[qi] = -INFINITY;
    run_sum[qi] = tot_sum[qi] = 0.0f;
    for (int32_t e = 0; e < hd; ++e) tot_acc[qi * ldk + e] = 0.0f;
    const int32_t row = t.t0 + qi / group, h = t.kv_head * group + qi % group;
    float* o = t.out + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
    for (int32_t e = 0; e < hd; ++e) o[e] = 0.0f;
  }

  const int32_t last_pos = first_pos + (t.t1 - 1 - q0);
  for (int32_t kb0 = 0; kb0 <= last_pos; kb0 += bs) {
    const int32_t kb1 = kb0 + bs <= last_pos + 1 ? kb0 + bs : last_pos + 1;
    const int64_t block = table[kb0 / bs];
    if (kb0 > 0 && kb0 % (kAttnSegmentBlocks * bs) == 0)  // a new segment for the queries that see it
      for (int32_t qi = 0; qi < nq; ++qi) {
        const int32_t row = t.t0 + qi / group, h = t.kv_head * group + qi % group;
        if (first_pos + (row - q0) < kb0) continue;
        next_segment(tot_max[qi], tot_sum[qi], tot_acc + qi * ldk, run_max[qi], run_sum[qi],
                     t.out + (static_cast<int64_t>(row) * t.n_heads + h) * hd, hd);
      }
    // Widen this block's keys and values of our KV head to f32.
    for (int32_t j = 0; j < kb1 - kb0; ++j) {
      // Head-major blocks (backend.h): this head's rows of the block are contiguous.
      const int64_t off = c.row(block, t.kv_head, j);
      if (c.dtype == DType::F32) {
        const float* ks = static_cast<const float*>(c.k) + off;
        const float* vs = static_cast<const float*>(c.v) + off;
        for (int32_t e = 0; e < hd; e += kLanes) {
          const int n = hd - e < kLanes ? hd - e : kLanes;
          vstore_n(kf + j * ldk + e, vload_n(ks + e, n), n);
          vstore_n(vfb + j * ldk + e, vload_n(vs + e, n), n);
        }
      } else if (c.dtype == DType::I8 || c.dtype == DType::F8_E4M3) {  // codes · row scale (kv_quant.h)
        const bool i8 = c.dtype == DType::I8;
        const int64_t si = c.scale_index(block, t.kv_head, j);
        const float ksc = c.k_scale[si], vsc = c.v_scale[si];
        const uint8_t* ks = static_cast<const uint8_t*>(c.k) + off;
        const uint8_t* vs = static_cast<const uint8_t*>(c.v) + off;
        for (int32_t e = 0; e < hd; e += kLanes) {
          const int n = hd - e < kLanes ? hd - e : kLanes;
          vstore_n(kf + j * ldk + e, n == kLanes ? load_kv8(ks + e, i8, ksc) : load_kv8_n(ks + e, n, i8, ksc), n);
          vstore_n(vfb + j * ldk + e, n == kLanes ? load_kv8(vs + e, i8, vsc) : load_kv8_n(vs + e, n, i8, vsc), n);
        }
      } else {
        const uint16_t* ks = static_cast<const uint16_t*>(c.k) + off;
        const uint16_t* vs = static_cast<const uint16_t*>(c.v) + off;
        for (int32_t e = 0; e < hd; e += kLanes) {
          const int n = hd - e < kLanes ? hd - e : kLanes;
          vstore_n(kf + j * ldk + e, load_bf16_n(ks + e, n), n);
          vstore_n(vfb + j * ldk + e, load_bf16_n(vs + e, n), n);
        }
      }
    }
    for (int32_t qi = 0; qi < nq; ++qi) {
      const int32_t row = t.t0 + qi / group, h = t.kv_head * group + qi % group;
      const int32_t pos = first_pos + (row - q0);
      if (pos < kb0) continue;  // this block is entirely in the query's future
      const int32_t nk = (pos + 1 < kb1 ? pos + 1 : kb1) - kb0;
      const float* qv = t.q + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
      float* o = t.out + (static_cast<int64_t>(row) * t.n_heads + h) * hd;

      float bmax = -INFINITY;
      for (int32_t j = 0; j < nk; ++j) {
        s[j] = dot_f32(qv, kf + j * ldk, hd) * scale;
        bmax = s[j] > bmax ? s[j] : bmax;
      }
      const float m_new = run_max[qi] > bmax ? run_max[qi] : bmax;
      const float alpha = exp_scalar(run_max[qi] - m_new);  // 0 on the first block (-inf)
      const vf vm = vset1(m_new);
      for (int32_t j = 0; j < nk; j += kLanes) {
        const int n = nk - j < kLanes ? nk - j : kLanes;
        vstore_n(s + j, vexp(vsub(vload_n(s + j, n), vm)), n);
      }
      float sum = 0.0f;
      for (int32_t j = 0; j < nk; ++j) sum += s[j];
      run_sum[qi] = run_sum[qi] * alpha + sum;
      run_max[qi] = m_new;
      const vf va = vset1(alpha);
      for (int32_t e = 0; e < hd; e += kLanes) {
        const int n = hd - e < kLanes ? hd - e : kLanes;
        vf acc = vmul(vload_n(o + e, n), va);
        for (int32_t j = 0; j < nk; ++j) acc = vfma(vset1(s[j]), vload_n(vfb + j * ldk + e, n), acc);
        vstore_n(o + e, acc, n);
      }
    }
  }

  for (int32_t qi = 0; qi < nq; ++qi) {
    const int32_t row = t.t0 + qi / group, h = t.kv_head * group + qi % group;
    float* o = t.out + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
    finish_query(tot_max[qi], tot_sum[qi], tot_acc + qi * ldk, run_max[qi], run_sum[qi], o, hd);
  }
}

}  // namespace pypto::cpu::PYPTO_ISA_NS

namespace pypto::cpu::PYPTO_ISA_NS {

// Query-heads sharing each value load in P·V.
constexpr int kAttnTile = kLanes == 16 ? 4 : 2;
// A cache block goes through the column path when at least this many query-heads of the task see
// it; below that (decode) the row path is cheaper.
constexpr int32_t kAttnColsMin = kAttentionColsMin;
// Column-path register tile: keys × query vectors (kLanes query-heads each).
constexpr int kAttnTileKeys = kLanes == 16 ? 4 : 2;
constexpr int kAttnTileQv = 2;
// How far ahead a task prefetches its K / V rows, in cache blocks (see attention_fast; 2 and 4
// measured no faster than 1 on a 16-sequence decode step from DRAM).
constexpr int32_t kAttnPrefetchBlocks = 1;

// r[i] lane j -> r[j] lane i (kLanes × kLanes, exact: only moves).
inline void transpose_lanes(vf (&r)[kLanes]) {
  constexpr int L = kLanes;
  vf t[L];
  for (int i = 0; i < L / 2; ++i) {
#if defined(__AVX512F__)
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
#else
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
#endif
  }
  // u[4i + k], 128-bit group g: column 4g + k of rows 4i .. 4i + 3.
  vf u[L];
  for (int i = 0; i < L / 4; ++i) {
#if defined(__AVX512F__)
    auto lo = [](vf a, vf b) { return _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(b))); };
    auto hi = [](vf a, vf b) { return _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(b))); };
#else
    auto lo = [](vf a, vf b) { return _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(a), _mm256_castps_pd(b))); };
    auto hi = [](vf a, vf b) { return _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(a), _mm256_castps_pd(b))); };
#endif
    u[4 * i] = lo(t[4 * i], t[4 * i + 2]);
    u[4 * i + 1] = hi(t[4 * i], t[4 * i + 2]);
    u[4 * i + 2] = lo(t[4 * i + 1], t[4 * i + 3]);
    u[4 * i + 3] = hi(t[4 * i + 1], t[4 * i + 3]);
  }
  // Column 4g + k = group g of u[k], u[4 + k], ... in order.
  for (int k = 0; k < 4; ++k) {
#if defined(__AVX512F__)
    const vf v1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0x88), v2 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0x88);
    const vf w1 = _mm512_shuffle_f32x4(u[k], u[4 + k], 0xdd), w2 = _mm512_shuffle_f32x4(u[8 + k], u[12 + k], 0xdd);
    r[k] = _mm512_shuffle_f32x4(v1, v2, 0x88);
    r[8 + k] = _mm512_shuffle_f32x4(v1, v2, 0xdd);
    r[4 + k] = _mm512_shuffle_f32x4(w1, w2, 0x88);
    r[12 + k] = _mm512_shuffle_f32x4(w1, w2, 0xdd);
#else
    r[k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x20);
    r[4 + k] = _mm256_permute2f128_ps(u[k], u[4 + k], 0x31);
#endif
  }
}

// Row path: one online-softmax step of one query-head over one key group. s: the group's scores
// (scaled); lanes >= nk are not keys of this query (any content: replaced by -inf, probability
// exactly 0). Updates the running max m and sum l, sets alpha = e^(m_old - m_new), returns the
// probabilities. hmax / hsum / exp_scalar: the column path does exactly these operations lane-wise.
inline vf softmax_step(vf s, int nk, float& m, float& l, float& alpha) {
  alignas(64) static constexpr float kLaneIndex[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  s = vselect_lt(vload(kLaneIndex), vset1(static_cast<float>(nk)), s, vset1(-INFINITY));
  const float gmax = hmax(s);
  const float m_new = m > gmax ? m : gmax;
  alpha = exp_scalar(m - m_new);  // 0 on the first group (m = -inf)
  const vf p = vexp(vsub(s, vset1(m_new)));
  l = l * alpha + hsum(p);
  m = m_new;
  return p;
}

// Column path scores: J keys × QV query vectors; lane i of st[qv][j] = score of query-head i of
// vector qv against key j. k: key rows f32 (row j at k + j·hd), qt: the query vectors transposed,
// [hd][L] each, qt_step floats apart. Summed exactly as the row path sums a score — chain r
// (r < L) = Σ_c q[r + cL]·k[r + cL] by FMA in increasing c from 0 (the row path's lane r), then
// the chains added in reduce_lanes' fixed tree: G_g = (r_4g + r_4g+2) + (r_4g+1 + r_4g+3), total
// (G0 + G1) + (G2 + G3) with 16 lanes, G0 + G1 with 8 — and scaled. Per FMA step: QV query loads
// and J key broadcasts feed J·QV FMAs.
template <int HC, int J, int QV>
inline void scores_cols(const float* k, const float* qt, int64_t qt_step, float scale, float* st) {
  constexpr int L = kLanes, hd = HC * L;
  using Acc = vf[J][QV];
  // Chains r0 and r1 at once.
  auto chains = [&](int r0, int r1, Acc& c0, Acc& c1) __attribute__((always_inline)) {
    for (int j = 0; j < J; ++j)
      for (int v = 0; v < QV; ++v) c0[j][v] = c1[j][v] = vzero();
    for (int cc = 0; cc < HC; ++cc) {
      const int d0 = cc * L + r0, d1 = cc * L + r1;
      vf q0[QV], q1[QV];
      for (int v = 0; v < QV; ++v) {
        q0[v] = vload(qt + v * qt_step + d0 * L);
        q1[v] = vload(qt + v * qt_step + d1 * L);
      }
      for (int j = 0; j < J; ++j) {
        const vf b0 = vset1(k[j * hd + d0]), b1 = vset1(k[j * hd + d1]);
        for (int v = 0; v < QV; ++v) {
          c0[j][v] = vfma(b0, q0[v], c0[j][v]);
          c1[j][v] = vfma(b1, q1[v], c1[j][v]);
        }
      }
    }
  };
  Acc g[L / 4];
  for (int q = 0; q < L / 4; ++q) {
    Acc x, y, a;
    chains(4 * q, 4 * q + 2, x, y);
    for (int j = 0; j < J; ++j)
      for (int v = 0; v < QV; ++v) a[j][v] = vadd(x[j][v], y[j][v]);
    chains(4 * q + 1, 4 * q + 3, x, y);
    for (int j = 0; j < J; ++j)
      for (int v = 0; v < QV; ++v) g[q][j][v] = vadd(a[j][v], vadd(x[j][v], y[j][v]));
  }
  const vf vs = vset1(scale);
  for (int j = 0; j < J; ++j)
    for (int v = 0; v < QV; ++v) {
      vf s;
      if constexpr (L == 16)
        s = vadd(vadd(g[0][j][v], g[1][j][v]), vadd(g[2][j][v], g[3][j][v]));
      else
        s = vadd(g[0][j][v], g[1][j][v]);
      vstore(st + (v * L + j) * L, vmul(s, vs));
    }
}

// Some lane of nk is in (0, kLanes): a query-head that sees only part of the group.
inline bool any_partial(vf nk) {
  const vf one = vset1(1.0f), zero = vzero();
  return hmax(vselect_lt(zero, nk, vselect_lt(nk, vset1(static_cast<float>(kLanes)), one, zero), zero)) > 0.0f;
}

// Column path softmax for one query vector and one key group: st = [L keys][L lanes] scores →
// probabilities. nk: per lane the keys of the group the query-head sees (lanes with nk <= 0 are
// left unchanged in m and l). The same operations as softmax_step, lane-wise: the max and the
// sum over keys in hmax's / hsum's order ((l, l + L/2), then halves down to (0, 1)), the same
// operand order for max, exp lane by lane.
inline void softmax_cols(float* st, vf nk, bool masked, float* m, float* l, float* alpha) {
  constexpr int L = kLanes;
  vf s[L], t[L / 2];
  for (int j = 0; j < L; ++j) {
    s[j] = vload(st + j * L);
    if (masked) s[j] = vselect_lt(vset1(static_cast<float>(j)), nk, s[j], vset1(-INFINITY));
  }
  for (int j = 0; j < L / 2; ++j) t[j] = vmax(s[j], s[j + L / 2]);
  for (int w = L / 4; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) t[j] = vmax(t[j], t[j + w]);
  const vf m_old = vload(m), l_old = vload(l);
  const vf m_new = vmax(m_old, t[0]);  // = m_old > gmax ? m_old : gmax
  const vf a = vexp(vsub(m_old, m_new));
  for (int j = 0; j < L; ++j) {
    s[j] = vexp(vsub(s[j], m_new));
    vstore(st + j * L, s[j]);
  }
  for (int j = 0; j < L / 2; ++j) t[j] = vadd(s[j], s[j + L / 2]);
  for (int w = L / 4; w >= 1; w /= 2)
    for (int j = 0; j < w; ++j) t[j] = vadd(t[j], t[j + w]);
  const vf l_new = vadd(vmul(l_old, a), t[0]);
  const vf zero = vzero();
  vstore(m, vselect_lt(zero, nk, m_new, m_old));
  vstore(l, vselect_lt(zero, nk, l_new, l_old));
  vstore(alpha, a);
}

// P·V of N query-heads over the first nk keys of one group (value rows vg[j · HC·L]):
// o_i = alpha_i · o_i, then o_i += p_i[j] · v_j for j = 0 .. nk-1 in order, by FMA — the same
// for any N. p_i[j] = p[i · pi + j · pj] (column path: pi = 1, pj = L; row path: pi = L, pj = 1).
// Each value load feeds N FMAs, each broadcast probability CB.
template <int HC, int N>
inline void pv_update(float* const* o, const float* alpha, const float* p, int pi, int pj, const float* vg, int nk) {
  constexpr int L = kLanes, hd = HC * L;
  constexpr int kHalfRegs = L == 16 ? 16 : 8;
  constexpr int CB = (HC <= kHalfRegs / N) ? HC : (8 <= kHalfRegs / N ? 8 : (4 <= kHalfRegs / N ? 4 : 2));
  static_assert(HC % CB == 0);
  for (int ch0 = 0; ch0 < HC; ch0 += CB) {
    vf a[N][CB];
    for (int i = 0; i < N; ++i) {
      const vf va = vset1(alpha[i]);
      for (int cb = 0; cb < CB; ++cb) a[i][cb] = vmul(vload(o[i] + (ch0 + cb) * L), va);
    }
    for (int j = 0; j < nk; ++j) {
      vf pv[N];
      for (int i = 0; i < N; ++i) pv[i] = vset1(p[i * pi + j * pj]);
      for (int cb = 0; cb < CB; ++cb) {
        const vf v = vload(vg + static_cast<int64_t>(j) * hd + (ch0 + cb) * L);
        for (int i = 0; i < N; ++i) a[i][cb] = vfma(pv[i], v, a[i][cb]);
      }
    }
    for (int i = 0; i < N; ++i)
      for (int cb = 0; cb < CB; ++cb) vstore(o[i] + (ch0 + cb) * L, a[i][cb]);
  }
}

template <int HC, int N = kAttnTile>
inline void pv_run(int n, float* const* o, const float* alpha, const float* p, int pi, int pj, const float* vg,
                   int nk) {
  if constexpr (N > 1)
    if (n < N) return pv_run<HC, N - 1>(n, o, alpha, p, pi, pj, vg, nk);
  pv_update<HC, N>(o, alpha, p, pi, pj, vg, nk);
}

// P·V of query-heads 0 .. n-1 over one key group, query-head i seeing keys(i) of it (<= 0: none):
// runs of consecutive query-heads that see the same number of keys, up to kAttnTile, share each
// value load (pv_run); p_i = p + i · pi as pv_update reads it.
template <int HC, class Keys>
inline void pv_same_keys(int32_t n, Keys keys, float* const* o, const float* alpha, const float* p, int pi, int pj,
                         const float* vg) {
  for (int32_t i = 0; i < n;) {
    const int32_t nk = keys(i);
    if (nk <= 0) {
      ++i;
      continue;
    }
    int32_t e = i + 1;
    while (e < n && e - i < kAttnTile && keys(e) == nk) ++e;
    pv_run<HC>(e - i, o + i, alpha + i, p + static_cast<int64_t>(i) * pi, pi, pj, vg, nk);
    i = e;
  }
}

// Row path scores of one query-head q ([HC·L]) against the L key rows kg ([L, HC·L] f32; rows past
// the block's end are zeros, masked later by softmax_step whatever their scores): lane j = key j.
// Lane r of acc[j] is chain r of key j (see scores_cols); reduce_lanes adds the chains.
template <int HC>
__attribute__((always_inline)) inline vf row_scores(const float* q, const float* kg, float scale) {
  constexpr int L = kLanes;
  constexpr int32_t hd = HC * L;
  vf acc[L];
  for (int j = 0; j < L; ++j) acc[j] = vzero();
  for (int ch = 0; ch < HC; ++ch) {
    const vf qv = vload(q + ch * L);
    for (int j = 0; j < L; ++j) acc[j] = vfma(qv, vload(kg + j * hd + ch * L), acc[j]);
  }
  return vmul(reduce_lanes(acc), vset1(scale));
}

// Row path: one query-head q ([HC·L]) over the first nk keys of a block widened to f32 (kf, vfb:
// [round_lanes(block), HC·L], rows past the block's end zero in kf), L keys per step; m, l its
// running max and sum, o ([HC·L]) its running numerator; p: [L] scratch. The one definition of the
// row path's arithmetic (attention_fast and the decode tasks of attention_decode_heads.h).
template <int HC>
__attribute__((always_inline)) inline void row_path_block(const float* q, float* o, const float* kf, const float* vfb,
                                                          int32_t nkeys, float scale, float& m, float& l, float* p) {
  constexpr int L = kLanes;
  constexpr int32_t hd = HC * L;
  for (int32_t g0 = 0; g0 < nkeys; g0 += L) {
    const int nk = nkeys - g0 < L ? nkeys - g0 : L;
    const vf s = row_scores<HC>(q, kf + static_cast<int64_t>(g0) * hd, scale);
    float a;
    vstore(p, softmax_step(s, nk, m, l, a));
    pv_update<HC, 1>(&o, &a, p, L, 1, vfb + static_cast<int64_t>(g0) * hd, nk);
  }
}

// Row `j` of KV head `head` in cache block `block`, K and V, as f32 into kd / vd ([head_dim] each):
// bf16 widened exactly, 8-bit codes times the row's scale (kv_quant_simd.h), f32 copied.
template <int HC>
__attribute__((always_inline)) inline void widen_row(const KvCacheLayer& c, int64_t block, int32_t head, int32_t j,
                                                     float* kd, float* vd) {
  constexpr int L = kLanes;
  const int64_t off = c.row(block, head, j);  // head-major block
  if (c.dtype == DType::F32) {
    const float* ks = static_cast<const float*>(c.k) + off;
    const float* vs = static_cast<const float*>(c.v) + off;
    for (int ch = 0; ch < HC; ++ch) {
      vstore(kd + ch * L, vload(ks + ch * L));
      vstore(vd + ch * L, vload(vs + ch * L));
    }
  } else if (c.dtype == DType::I8) {  // codes · the row's scale, in registers (kv_quant_simd.h)
    const int64_t si = c.scale_index(block, head, j);
    const vf ksc = vset1(c.k_scale[si]), vsc = vset1(c.v_scale[si]);
    const int8_t* ks = static_cast<const int8_t*>(c.k) + off;
    const int8_t* vs = static_cast<const int8_t*>(c.v) + off;
    for (int ch = 0; ch < HC; ++ch) {
      vstore(kd + ch * L, load_kv_i8(ks + ch * L, ksc));
      vstore(vd + ch * L, load_kv_i8(vs + ch * L, vsc));
    }
  } else if (c.dtype == DType::F8_E4M3) {
    const int64_t si = c.scale_index(block, head, j);
    const vf ksc = vset1(c.k_scale[si] * 256.0f), vsc = vset1(c.v_scale[si] * 256.0f);  // 2^8: see kv_quant_simd.h
    const uint8_t* ks = static_cast<const uint8_t*>(c.k) + off;
    const uint8_t* vs = static_cast<const uint8_t*>(c.v) + off;
    for (int ch = 0; ch < HC; ++ch) {
      vstore(kd + ch * L, load_kv_e4m3(ks + ch * L, ksc));
      vstore(vd + ch * L, load_kv_e4m3(vs + ch * L, vsc));
    }
  } else {
    const uint16_t* ks = static_cast<const uint16_t*>(c.k) + off;
    const uint16_t* vs = static_cast<const uint16_t*>(c.v) + off;
    for (int ch = 0; ch < HC; ++ch) {
      vstore(kd + ch * L, load_bf16(ks + ch * L));
      vstore(vd + ch * L, load_bf16(vs + ch * L));
    }
  }
}

template <int HC>
inline void attention_fast(const AttentionTask& t, float* scratch) {
  constexpr int L = kLanes, J = kAttnTileKeys, QV = kAttnTileQv;
  constexpr int32_t hd = HC * L;
  const KvCacheLayer& c = *t.cache;
  const AttentionBatch& b = *t.batch;
  const int32_t bs = c.block_size;
  const int32_t group = t.n_heads / c.n_kv_heads;
  const int32_t q0 = b.query_start[t.seq], q1 = b.query_start[t.seq + 1];
  const int32_t first_pos = b.context_len[t.seq] - (q1 - q0);
  const int32_t* table = b.block_tables + static_cast<int64_t>(t.seq) * b.max_blocks_per_seq;
  const int32_t nq = (t.t1 - t.t0) * group;
  const int32_t nqv = (nq + L - 1) / L;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  constexpr int kMaxQ = kAttentionMaxQueries + kLanes;  // query-head slots, padded to whole vectors

  float* kf = scratch;                            // [round_lanes(bs), hd]  this block's keys, f32
  float* vfb = kf + round_lanes(bs) * hd;         // [round_lanes(bs), hd]  this block's values, f32
  float* qt = vfb + round_lanes(bs) * hd;         // [nqv][hd][L]  query vectors, transposed
  float* st = qt + static_cast<int64_t>(kMaxQ) * hd;  // [QV][L][L]  scores → probabilities
  float* alpha = st + QV * L * L;                 // [QV][L]
  float* run_max = alpha + QV * L;                // [kMaxQ]
  float* run_sum = run_max + kMaxQ;               // [kMaxQ]
  float* p = run_sum + kMaxQ;                     // [L]  row path probabilities
  float* tot_max = p + L;                         // [kMaxQ]  folded segments (fold_segment)
  float* tot_sum = tot_max + kMaxQ;               // [kMaxQ]
  float* tot_acc = tot_sum + kMaxQ;               // [kMaxQ, hd]
  // [nq, hd]  running numerators, query-head by query-head: contiguous in this thread's scratch
  // rather than in `out`, whose rows are n_heads · hd floats apart. There, the task's numerators
  // (1 KB per row at a multiple of 4 KB apart) fell into the same few L1 sets and went back to L2
  // every key group, and the other thread's task (the neighbouring KV head, same rows) wrote into
  // the same pages: 2 threads ran 1.0–1.8× one thread on BM_Attention/512/512 from run to run, a
  // 16K prefill took 20 % longer. Only storage: no value changes.
  float* oacc = tot_acc + static_cast<int64_t>(kMaxQ) * hd;

  // Query-head qi = (row - t0) · group + head within the group.
  const float* qp[kAttentionMaxQueries];
  float* op[kAttentionMaxQueries];   // its running numerator (oacc)
  float* outp[kAttentionMaxQueries]; // its output row in `out`
  int32_t pos[kMaxQ];
  alignas(64) float posf[kMaxQ];  // positions as f32 (exact below 2^24)
  for (int32_t qi = 0; qi < nq; ++qi) {
    const int32_t row = t.t0 + qi / group, h = t.kv_head * group + qi % group;
    qp[qi] = t.q + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
    op[qi] = oacc + static_cast<int64_t>(qi) * hd;
    outp[qi] = t.out + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
    pos[qi] = first_pos + (row - q0);
    posf[qi] = static_cast<float>(pos[qi]);
    run_max[qi] = tot_max[qi] = -INFINITY;
    run_sum[qi] = tot_sum[qi] = 0.0f;
    for (int ch = 0; ch < HC; ++ch) {
      vstore(op[qi] + ch * L, vzero());
      vstore(tot_acc + qi * hd + ch * L, vzero());
    }
  }
  for (int32_t qi = nq; qi < nqv * L; ++qi) {  // padding lanes: see nothing
    pos[qi] = -1;
    posf[qi] = -1.0f;
    run_max[qi] = -INFINITY;
    run_sum[qi] = 0.0f;
  }
  // First query-head that sees key `key` (rows are in position order).
  auto first_seeing = [&](int32_t key) {
    const int32_t row = q0 + (key - first_pos) > t.t0 ? q0 + (key - first_pos) : t.t0;
    return (row - t.t0) * group;
  };
  bool have_qt = false;

  const int32_t last_pos = first_pos + (t.t1 - 1 - q0);
  // This head's K / V rows of the block kAttnPrefetchBlocks ahead (one contiguous run of bs ·
  // head_dim elements in the head-major block, but the next block of a sequence may lie anywhere
  // in the pool) are prefetched into L2 while a block is widened, so a decode task, little
  // arithmetic per byte, streams the cache instead of waiting on each block. Into L2: measured
  // slightly faster than L1, which the f32 scratch blocks share. A hint only: no value changes.
  const int64_t esize = c.dtype == DType::F32 ? 4 : (c.dtype == DType::BF16 ? 2 : 1), row_bytes = hd * esize;
  const int64_t block_bytes = static_cast<int64_t>(c.n_kv_heads) * bs * row_bytes;  // all heads
  const char* kbase = static_cast<const char*>(c.k) + static_cast<int64_t>(t.kv_head) * bs * row_bytes;
  const char* vbase = static_cast<const char*>(c.v) + static_cast<int64_t>(t.kv_head) * bs * row_bytes;
  // (Captures by value: capturing by reference measured as slow as no prefetch at all.)
  auto prefetch_rows = [kbase, vbase, block_bytes, row_bytes](int64_t blk, int32_t j) __attribute__((always_inline)) {
    const int64_t poff = blk * block_bytes + j * row_bytes;
    for (int64_t e = 0; e < row_bytes; e += 64) {
      _mm_prefetch(kbase + poff + e, _MM_HINT_T1);
      _mm_prefetch(vbase + poff + e, _MM_HINT_T1);
    }
  };
  for (int32_t b = 1; b < kAttnPrefetchBlocks && b * bs <= last_pos; ++b) {
    const int32_t rows = (b + 1) * bs <= last_pos + 1 ? bs : last_pos + 1 - b * bs;
    for (int32_t j = 0; j < rows; ++j) prefetch_rows(table[b], j);
  }
  for (int32_t kb0 = 0; kb0 <= last_pos; kb0 += bs) {
    const int32_t kb1 = kb0 + bs <= last_pos + 1 ? kb0 + bs : last_pos + 1;
    const int32_t nrows = kb1 - kb0;
    const int64_t block = table[kb0 / bs];
    if (kb0 > 0 && kb0 % (kAttnSegmentBlocks * bs) == 0)  // a new segment for the queries that see it
      for (int32_t qi = first_seeing(kb0); qi < nq; ++qi)
        next_segment(tot_max[qi], tot_sum[qi], tot_acc + qi * hd, run_max[qi], run_sum[qi], op[qi], hd);
    // Block kb0 / bs + kAttnPrefetchBlocks: rows of this head to prefetch while this one is used.
    const int32_t pf0 = kb0 + kAttnPrefetchBlocks * bs;
    const int32_t next_rows = pf0 <= last_pos ? (pf0 + bs <= last_pos + 1 ? bs : last_pos + 1 - pf0) : 0;
    const int64_t next_block = next_rows > 0 ? table[pf0 / bs] : 0;
    if (next_rows > 0 && c.k_scale) {  // 8-bit: the next block's row scales too (bs floats each)
      _mm_prefetch(reinterpret_cast<const char*>(c.k_scale + c.scale_index(next_block, t.kv_head, 0)), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(c.v_scale + c.scale_index(next_block, t.kv_head, 0)), _MM_HINT_T1);
    }
    for (int32_t j = 0; j < nrows; ++j) {
      if (j < next_rows) prefetch_rows(next_block, j);
      widen_row<HC>(c, block, t.kv_head, j, kf + j * hd, vfb + j * hd);
    }

    // Key rows past the block's end up to a whole group: zeros (their scores are masked anyway).
    for (int32_t j = nrows; j < round_lanes(nrows); ++j)
      for (int ch = 0; ch < HC; ++ch) vstore(kf + j * hd + ch * L, vzero());

    if (nq - first_seeing(kb0) >= kAttnColsMin) {
      // Column path: scores for whole query vectors (kLanes query-heads), softmax lane-wise.
      if (!have_qt) {
        for (int32_t v = 0; v < nqv; ++v)
          for (int ch = 0; ch < HC; ++ch) {
            vf r[L];
            for (int i = 0; i < L; ++i) r[i] = v * L + i < nq ? vload(qp[v * L + i] + ch * L) : vzero();
            transpose_lanes(r);
            for (int e = 0; e < L; ++e) vstore(qt + (static_cast<int64_t>(v) * hd + ch * L + e) * L, r[e]);
          }
        have_qt = true;
      }
      for (int32_t g0 = kb0; g0 < kb1; g0 += L) {
        const int nkeys = kb1 - g0 < L ? kb1 - g0 : L;  // keys of this group in the cache
        const float* kg = kf + static_cast<int64_t>(g0 - kb0) * hd;
        const float* vg = vfb + static_cast<int64_t>(g0 - kb0) * hd;
        for (int32_t v0 = first_seeing(g0) / L; v0 < nqv; v0 += QV) {
          const int nv = nqv - v0 < QV ? nqv - v0 : QV;
          const float* qtv = qt + static_cast<int64_t>(v0) * hd * L;
          for (int j0 = 0; j0 < nkeys; j0 += J) {
            if (nv == QV)
              scores_cols<HC, J, QV>(kg + j0 * hd, qtv, static_cast<int64_t>(hd) * L, scale, st + j0 * L);
            else
              scores_cols<HC, J, 1>(kg + j0 * hd, qtv, static_cast<int64_t>(hd) * L, scale, st + j0 * L);
          }
          for (int v = 0; v < nv; ++v) {
            const int32_t qb = (v0 + v) * L;
            float* sv = st + v * L * L;
            float* av = alpha + v * L;
            // Keys of the group each lane sees: [g0, min(pos + 1, kb1)), at most L (exact in f32).
            const vf nkv = vmin(vsub(vmin(vload(posf + qb), vset1(static_cast<float>(kb1 - 1))),
                                     vset1(static_cast<float>(g0 - 1))),
                                vset1(static_cast<float>(L)));
            alignas(64) float nkf[16];
            vstore(nkf, nkv);
            // Masking needed unless every lane sees the whole group or nothing of it.
            const bool masked = nkeys < L || any_partial(nkv);
            softmax_cols(sv, nkv, masked, run_max + qb, run_sum + qb, av);
            // P·V: consecutive query-heads that see the same keys share the value loads.
            pv_same_keys<HC>(nq - qb < L ? nq - qb : L, [&](int32_t i) { return static_cast<int32_t>(nkf[i]); },
                             op + qb, av, sv, 1, L, vg);
          }
        }
      }
    } else {
      // Row path (few query-heads, e.g. decode): one query-head at a time, L keys per step.
      for (int32_t qi = first_seeing(kb0); qi < nq; ++qi) {
        const int32_t limit = pos[qi] + 1 < kb1 ? pos[qi] + 1 : kb1;
        row_path_block<HC>(qp[qi], op[qi], kf, vfb, limit - kb0, scale, run_max[qi], run_sum[qi], p);
      }
    }
  }

  for (int32_t qi = 0; qi < nq; ++qi) {
    finish_query(tot_max[qi], tot_sum[qi], tot_acc + qi * hd, run_max[qi], run_sum[qi], op[qi], hd);
    for (int ch = 0; ch < HC; ++ch) vstore(outp[qi] + ch * L, vload(op[qi] + ch * L));
  }
}

#include "kernels/cpu/attention_decode_heads.h"

inline bool attention_splits(int32_t head_dim) {
  const int32_t hc = head_dim % kLanes == 0 ? head_dim / kLanes : 0;
  return hc == 4 || hc == 8 || hc == 16;
}

inline void attention(const AttentionTask& t, float* scratch) {
  if (t.kv_head_end > t.kv_head || t.partial) {  // a decode-heads task (attention_decode_heads.h)
    switch (t.cache->head_dim / kLanes * (t.cache->head_dim % kLanes == 0 ? 1 : 0)) {
      case 4: return attention_decode_heads<4>(t, scratch);
      case 8: return attention_decode_heads<8>(t, scratch);
      case 16: return attention_decode_heads<16>(t, scratch);
      default:  // generic head_dim: one head at a time (the same arithmetic either way)
        PYPTO_ASSERT(!t.partial, "split decode task at head_dim ", t.cache->head_dim);
        for (int32_t h = t.kv_head; h < t.kv_head_end; ++h) {
          AttentionTask one = t;
          one.kv_head = h;
          one.kv_head_end = 0;
          attention_generic(one, scratch);
        }
        return;
    }
  }
  switch (t.cache->head_dim / kLanes * (t.cache->head_dim % kLanes == 0 ? 1 : 0)) {
    case 4: return attention_fast<4>(t, scratch);
    case 8: return attention_fast<8>(t, scratch);
    case 16: return attention_fast<16>(t, scratch);
    default: return attention_generic(t, scratch);
  }
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
