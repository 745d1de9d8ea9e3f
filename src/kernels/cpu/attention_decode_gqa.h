#pragma once
// A GQA group's decode arithmetic straight from the cache rows (included by
// attention_decode_heads.h, in the ISA namespace, after row_scores / softmax_step / pv_update).
//
// Why: a decode task with many query-heads per KV head (the Qwen3.5 / 3.6 hybrids' and
// Qwen3-30B-A3B's GQA groups of 8) first widened each block's K and V rows to an f32 tile
// (widen_row: a load, a conversion and a store per 16 elements) and then read the tile back once
// per query-head: row_scores one load per FMA, pv_update one value load per kAttnTile heads. At
// 32K on the AMD EPYC Zen 5 host (perf record, BM_AttentionDecodeBatch/32768/1/1/0/1) the
// widening took about a quarter of the task's samples and the whole step ran at ~0.6 FMA per
// cycle, the arithmetic, not the memory, being the limit. Here a group of L keys goes through
// registers only: each K element is converted once and feeds the FMAs of all the tile's
// query-heads (kGqaTileHeads), each V element likewise in P·V, nothing is stored but the scores
// and the running numerators.
//
// Arithmetic: exactly the row path's (row_scores, softmax_step, pv_update) per query-head — the
// same FMA chains in the same order, reduce_lanes on the same L chain vectors, the same softmax
// step, P·V with o·α first and then the keys in order — so a query's bits do not depend on this
// path being taken. The cache rows are converted by the functions widen_row uses (load_bf16,
// load_kv_i8 / load_kv_e4m3 with the row's scale, f32 as is), so they are the tile's values.
//
// Shapes: q[i], o[i] [HC·L] per query-head; scores acc [NH, L keys, L chains]; p [heads, L].

// Query-heads whose scores share each converted key element: NH heads × 2 keys accumulators
// (16 of the 32 zmm registers; 8 of the 16 ymm).
constexpr int kGqaTileHeads = kLanes == 16 ? 8 : 4;

// An all-zero row standing for keys past the cache in a group (their scores are masked anyway):
// big enough for head_dim 256 in f32.
alignas(64) inline constexpr uint8_t kGqaZeroRow[256 * 4] = {};

// The L rows of one key group of one KV head (K or V), by dtype; row j, chunk ch (L elements) as
// f32 exactly as widen_row writes it.
struct GqaRowsF32 {
  using Elem = float;
  const Elem* r[kLanes];
  __attribute__((always_inline)) vf load(int j, int ch) const { return vload(r[j] + ch * kLanes); }
};
struct GqaRowsBf16 {
  using Elem = uint16_t;
  const Elem* r[kLanes];
  __attribute__((always_inline)) vf load(int j, int ch) const { return load_bf16(r[j] + ch * kLanes); }
};
struct GqaRowsI8 {
  using Elem = int8_t;
  const Elem* r[kLanes];
  float s[kLanes];  // the row's scale
  __attribute__((always_inline)) vf load(int j, int ch) const { return load_kv_i8(r[j] + ch * kLanes, vset1(s[j])); }
};
struct GqaRowsE4m3 {
  using Elem = uint8_t;
  const Elem* r[kLanes];
  float s[kLanes];  // 256 · the row's scale, as widen_row (kv_quant_simd.h)
  __attribute__((always_inline)) vf load(int j, int ch) const { return load_kv_e4m3(r[j] + ch * kLanes, vset1(s[j])); }
};

// Rows [g0, g0 + L) of KV head `head` in cache block `block` (K when !is_v); rows at or past
// `valid` (the keys of the block in the cache that anyone sees) read the zero row.
template <class Rows>
__attribute__((always_inline)) inline void gqa_rows(Rows& rows, const KvCacheLayer& c, int64_t block, int32_t head,
                                                    int32_t g0, int32_t valid, bool is_v) {
  using T = typename Rows::Elem;
  const T* base = static_cast<const T*>(is_v ? c.v : c.k) + c.row(block, head, g0);
  for (int j = 0; j < kLanes; ++j)
    rows.r[j] = g0 + j < valid ? base + static_cast<int64_t>(j) * c.head_dim : reinterpret_cast<const T*>(kGqaZeroRow);
  if constexpr (std::is_same_v<Rows, GqaRowsI8> || std::is_same_v<Rows, GqaRowsE4m3>) {
    const float* sc = (is_v ? c.v_scale : c.k_scale) + c.scale_index(block, head, g0);
    for (int j = 0; j < kLanes; ++j) {
      const float s = g0 + j < valid ? sc[j] : 0.0f;
      if constexpr (std::is_same_v<Rows, GqaRowsE4m3>)
        rows.s[j] = s * 256.0f;
      else
        rows.s[j] = s;
    }
  }
}

// Score chains of NH query-heads against the L keys of a group: acc[(i·L + j)·L + r] = chain r
// of query-head i and key j (row_scores' acc[j] lane r: Σ_c q[r + cL]·k_j[r + cL] by FMA in
// increasing c from 0). Two keys at a time, each converted key chunk feeding 2·NH FMAs.
// hook(u) runs before key pair u (a prefetch slice: no value changes).
template <int HC, int NH, class Rows, class Hook>
__attribute__((always_inline)) inline void gqa_score_chains(const float* const* q, const Rows& k, float* acc,
                                                            Hook& hook) {
  constexpr int L = kLanes;
  for (int j = 0; j < L; j += 2) {
    hook(j / 2);
    vf a0[NH], a1[NH];
    for (int i = 0; i < NH; ++i) a0[i] = a1[i] = vzero();
    for (int ch = 0; ch < HC; ++ch) {
      const vf k0 = k.load(j, ch), k1 = k.load(j + 1, ch);
      for (int i = 0; i < NH; ++i) {
        const vf qv = vload(q[i] + ch * L);
        a0[i] = vfma(qv, k0, a0[i]);
        a1[i] = vfma(qv, k1, a1[i]);
      }
    }
    for (int i = 0; i < NH; ++i) {
      vstore(acc + (i * L + j) * L, a0[i]);
      vstore(acc + (i * L + j + 1) * L, a1[i]);
    }
  }
}

template <int HC, int NH = kGqaTileHeads, class Rows, class Hook>
inline void gqa_score_chains_n(int n, const float* const* q, const Rows& k, float* acc, Hook& hook) {
  if constexpr (NH > 1)
    if (n < NH) return gqa_score_chains_n<HC, NH - 1>(n, q, k, acc, hook);
  gqa_score_chains<HC, NH>(q, k, acc, hook);
}

// One query-head's scores from its chains (row_scores' reduction and scaling).
__attribute__((always_inline)) inline vf gqa_scores(const float* acc, float scale) {
  vf a[kLanes];
  for (int j = 0; j < kLanes; ++j) a[j] = vload(acc + j * kLanes);
  return vmul(reduce_lanes(a), vset1(scale));
}

// P·V of N query-heads over the first nk keys of a group, value rows from the cache: o_i = α_i·o_i,
// then o_i += p_i[j]·v_j for j = 0 .. nk-1 in order by FMA (pv_update's arithmetic); p_i[j] =
// p[i·L + j]. Each converted value chunk feeds N FMAs.
template <int HC, int N, class Rows>
__attribute__((always_inline)) inline void gqa_pv(float* const* o, const float* alpha, const float* p, const Rows& v,
                                                  int nk) {
  constexpr int L = kLanes;
  constexpr int kRegs = L == 16 ? 16 : 8;  // accumulators
  constexpr int CB = HC <= kRegs / N ? HC : (8 <= kRegs / N ? 8 : (4 <= kRegs / N ? 4 : (2 <= kRegs / N ? 2 : 1)));
  static_assert(HC % CB == 0);
  for (int ch0 = 0; ch0 < HC; ch0 += CB) {
    vf a[N][CB];
    for (int i = 0; i < N; ++i) {
      const vf va = vset1(alpha[i]);
      for (int cb = 0; cb < CB; ++cb) a[i][cb] = vmul(vload(o[i] + (ch0 + cb) * L), va);
    }
    for (int j = 0; j < nk; ++j) {
      vf vv[CB];
      for (int cb = 0; cb < CB; ++cb) vv[cb] = v.load(j, ch0 + cb);
      for (int i = 0; i < N; ++i) {
        const vf pv = vset1(p[i * L + j]);
        for (int cb = 0; cb < CB; ++cb) a[i][cb] = vfma(pv, vv[cb], a[i][cb]);
      }
    }
    for (int i = 0; i < N; ++i)
      for (int cb = 0; cb < CB; ++cb) vstore(o[i] + (ch0 + cb) * L, a[i][cb]);
  }
}

template <int HC, int N = kGqaTileHeads, class Rows>
inline void gqa_pv_n(int n, float* const* o, const float* alpha, const float* p, const Rows& v, int nk) {
  if constexpr (N > 1)
    if (n < N) return gqa_pv_n<HC, N - 1>(n, o, alpha, p, v, nk);
  gqa_pv<HC, N>(o, alpha, p, v, nk);
}

// One KV head's query-heads [0, hq) over one key group [g0, g0 + L) of a cache block: scores,
// softmax steps (gk[i]: the keys of the group query-head i sees, <= 0 none: its state is left
// as is) and P·V, runs of consecutive query-heads seeing the same keys sharing the value loads.
// valid: the keys of the block any query-head of the task sees. acc: [kGqaTileHeads, L, L]
// scratch; p: [hq, L]; alpha: [hq]. hook(u), u = 0 .. L/2 - 1: run once each, spread over the
// first tile's scores (the task's prefetch slices).
template <int HC, class Rows, class Hook>
inline void gqa_group(const KvCacheLayer& c, int64_t block, int32_t head, int32_t g0, int32_t valid, int32_t hq,
                      const float* const* q, float* const* o, const int32_t* gk, float scale, float* run_max,
                      float* run_sum, float* p, float* alpha, float* acc, Hook& hook) {
  constexpr int L = kLanes;
  Rows rows;
  gqa_rows(rows, c, block, head, g0, valid, false);
  auto none = [](int) {};
  for (int32_t i0 = 0; i0 < hq; i0 += kGqaTileHeads) {
    const int n = hq - i0 < kGqaTileHeads ? hq - i0 : kGqaTileHeads;
    if (i0 == 0)
      gqa_score_chains_n<HC>(n, q + i0, rows, acc, hook);
    else
      gqa_score_chains_n<HC>(n, q + i0, rows, acc, none);
    for (int i = 0; i < n; ++i) {
      if (gk[i0 + i] <= 0) continue;
      const vf sc = gqa_scores(acc + i * L * L, scale);
      vstore(p + (i0 + i) * L, softmax_step(sc, gk[i0 + i], run_max[i0 + i], run_sum[i0 + i], alpha[i0 + i]));
    }
  }
  gqa_rows(rows, c, block, head, g0, valid, true);
  for (int32_t i = 0; i < hq;) {
    const int32_t nk = gk[i];
    if (nk <= 0) {
      ++i;
      continue;
    }
    int32_t e = i + 1;
    while (e < hq && e - i < kGqaTileHeads && gk[e] == nk) ++e;
    gqa_pv_n<HC>(e - i, o + i, alpha + i, p + static_cast<int64_t>(i) * L, rows, nk);
    i = e;
  }
}

// gqa_group for the cache's dtype.
template <int HC, class Hook>
inline void gqa_group_any(const KvCacheLayer& c, int64_t block, int32_t head, int32_t g0, int32_t valid, int32_t hq,
                          const float* const* q, float* const* o, const int32_t* gk, float scale, float* run_max,
                          float* run_sum, float* p, float* alpha, float* acc, Hook& hook) {
  switch (c.dtype) {
    case DType::F32:
      return gqa_group<HC, GqaRowsF32>(c, block, head, g0, valid, hq, q, o, gk, scale, run_max, run_sum, p, alpha, acc, hook);
    case DType::I8:
      return gqa_group<HC, GqaRowsI8>(c, block, head, g0, valid, hq, q, o, gk, scale, run_max, run_sum, p, alpha, acc, hook);
    case DType::F8_E4M3:
      return gqa_group<HC, GqaRowsE4m3>(c, block, head, g0, valid, hq, q, o, gk, scale, run_max, run_sum, p, alpha,
                                        acc, hook);
    default:
      return gqa_group<HC, GqaRowsBf16>(c, block, head, g0, valid, hq, q, o, gk, scale, run_max, run_sum, p, alpha,
                                        acc, hook);
  }
}
