#pragma once
// Causal paged attention with online softmax, compiled once per ISA (include after simd.h).
//
// One task = the query rows [t0, t1) of one sequence × the query heads of one KV head (GQA: query
// head h reads KV head h / group). The task walks the sequence's keys block by block through its
// block table; each cache block is widened to f32 once (K and V, [block_size, head_dim]) and then
// used by every query-head of the task. A query at position p only sees keys 0..p.
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
// Two variants: attention_fast<HC> for head_dim = HC · L (64 / 128 / 256 with AVX-512): q held
// in registers, the scores of L keys at a time reduced together by reduce_lanes(), softmax on one
// vector; attention_generic for any other head_dim. A given head_dim always takes the same one.
#include <cmath>
#include <cstdint>

#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu::PYPTO_ISA_NS {

inline int64_t round_lanes(int64_t n) { return (n + kLanes - 1) / kLanes * kLanes; }

inline int64_t attention_scratch_floats(int32_t block_size, int32_t head_dim) {
  return 2 * static_cast<int64_t>(block_size) * round_lanes(head_dim) + round_lanes(block_size) +
         2 * kAttentionMaxQueries;
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
  const int64_t row_elems = static_cast<int64_t>(c.n_kv_heads) * hd;  // one cache slot, all heads

  float* kf = scratch;                        // [bs, ldk]  this block's keys, f32
  float* vfb = kf + bs * ldk;                 // [bs, ldk]  this block's values, f32
  float* s = vfb + bs * ldk;                  // [round_lanes(bs)]  scores → probabilities
  float* run_max = s + round_lanes(bs);       // [nq]
  float* run_sum = run_max + kAttentionMaxQueries; // [nq]

  // acc lives in `out` (this task's rows are written by no one else).
  for (int32_t qi = 0; qi < nq; ++qi) {
    run_max[qi] = -INFINITY;
    run_sum[qi] = 0.0f;
    const int32_t row = t.t0 + qi / group, h = t.kv_head * group + qi % group;
    float* o = t.out + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
    for (int32_t e = 0; e < hd; ++e) o[e] = 0.0f;
  }

  const int32_t last_pos = first_pos + (t.t1 - 1 - q0);
  for (int32_t kb0 = 0; kb0 <= last_pos; kb0 += bs) {
    const int32_t kb1 = kb0 + bs <= last_pos + 1 ? kb0 + bs : last_pos + 1;
    const int64_t block = table[kb0 / bs];
    // Widen this block's keys and values of our KV head to f32.
    for (int32_t j = 0; j < kb1 - kb0; ++j) {
      const int64_t off = (block * bs + j) * row_elems + static_cast<int64_t>(t.kv_head) * hd;
      if (c.dtype == DType::F32) {
        const float* ks = static_cast<const float*>(c.k) + off;
        const float* vs = static_cast<const float*>(c.v) + off;
        for (int32_t e = 0; e < hd; e += kLanes) {
          const int n = hd - e < kLanes ? hd - e : kLanes;
          vstore_n(kf + j * ldk + e, vload_n(ks + e, n), n);
          vstore_n(vfb + j * ldk + e, vload_n(vs + e, n), n);
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
    const vf inv = vset1(1.0f / run_sum[qi]);
    for (int32_t e = 0; e < hd; e += kLanes) {
      const int n = hd - e < kLanes ? hd - e : kLanes;
      vstore_n(o + e, vmul(vload_n(o + e, n), inv), n);
    }
  }
}

}  // namespace pypto::cpu::PYPTO_ISA_NS

namespace pypto::cpu::PYPTO_ISA_NS {

template <int HC>
inline void attention_fast(const AttentionTask& t, float* scratch) {
  const KvCacheLayer& c = *t.cache;
  const AttentionBatch& b = *t.batch;
  constexpr int32_t hd = HC * kLanes;
  const int32_t bs = c.block_size;
  const int32_t group = t.n_heads / c.n_kv_heads;
  const int32_t q0 = b.query_start[t.seq], q1 = b.query_start[t.seq + 1];
  const int32_t first_pos = b.context_len[t.seq] - (q1 - q0);
  const int32_t* table = b.block_tables + static_cast<int64_t>(t.seq) * b.max_blocks_per_seq;
  const int32_t nq = (t.t1 - t.t0) * group;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t row_elems = static_cast<int64_t>(c.n_kv_heads) * hd;

  float* kf = scratch;                            // [bs, hd]  this block's keys, f32
  float* vfb = kf + static_cast<int64_t>(bs) * hd;  // [bs, hd]  this block's values, f32
  float* p = vfb + static_cast<int64_t>(bs) * hd;   // [kLanes]  probabilities of one key group
  float* run_max = p + round_lanes(bs);           // [nq]
  float* run_sum = run_max + kAttentionMaxQueries;  // [nq]

  for (int32_t qi = 0; qi < nq; ++qi) {
    run_max[qi] = -INFINITY;
    run_sum[qi] = 0.0f;
    const int32_t row = t.t0 + qi / group, h = t.kv_head * group + qi % group;
    float* o = t.out + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
    for (int ch = 0; ch < HC; ++ch) vstore(o + ch * kLanes, vzero());
  }

  const int32_t last_pos = first_pos + (t.t1 - 1 - q0);
  for (int32_t kb0 = 0; kb0 <= last_pos; kb0 += bs) {
    const int32_t kb1 = kb0 + bs <= last_pos + 1 ? kb0 + bs : last_pos + 1;
    const int64_t block = table[kb0 / bs];
    for (int32_t j = 0; j < kb1 - kb0; ++j) {
      const int64_t off = (block * bs + j) * row_elems + static_cast<int64_t>(t.kv_head) * hd;
      if (c.dtype == DType::F32) {
        const float* ks = static_cast<const float*>(c.k) + off;
        const float* vs = static_cast<const float*>(c.v) + off;
        for (int ch = 0; ch < HC; ++ch) {
          vstore(kf + j * hd + ch * kLanes, vload(ks + ch * kLanes));
          vstore(vfb + j * hd + ch * kLanes, vload(vs + ch * kLanes));
        }
      } else {
        const uint16_t* ks = static_cast<const uint16_t*>(c.k) + off;
        const uint16_t* vs = static_cast<const uint16_t*>(c.v) + off;
        for (int ch = 0; ch < HC; ++ch) {
          vstore(kf + j * hd + ch * kLanes, load_bf16(ks + ch * kLanes));
          vstore(vfb + j * hd + ch * kLanes, load_bf16(vs + ch * kLanes));
        }
      }
    }
    for (int32_t qi = 0; qi < nq; ++qi) {
      const int32_t row = t.t0 + qi / group, h = t.kv_head * group + qi % group;
      const int32_t pos = first_pos + (row - q0);
      if (pos < kb0) continue;
      const int32_t limit = pos + 1 < kb1 ? pos + 1 : kb1;  // keys [kb0, limit) are visible
      const float* qp = t.q + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
      float* o = t.out + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
      vf qv[HC];
      for (int ch = 0; ch < HC; ++ch) qv[ch] = vload(qp + ch * kLanes);
      // Key groups of kLanes within the block: one online-softmax update per group.
      for (int32_t g0 = kb0; g0 < limit; g0 += kLanes) {
        const int nk = limit - g0 < kLanes ? limit - g0 : kLanes;
        const float* kg = kf + static_cast<int64_t>(g0 - kb0) * hd;
        vf acc[kLanes];
        for (int j = 0; j < kLanes; ++j) {
          acc[j] = vzero();
          if (j < nk)
            for (int ch = 0; ch < HC; ++ch) acc[j] = vfma(qv[ch], vload(kg + j * hd + ch * kLanes), acc[j]);
        }
        vf s = vmul(reduce_lanes(acc), vset1(scale));
        // Lanes past nk are not keys of this query: -inf, so their probability is exactly 0.
        float sl[kLanes];
        vstore(sl, s);
        for (int j = nk; j < kLanes; ++j) sl[j] = -INFINITY;
        s = vload(sl);
        const float gmax = hmax(s);
        const float m_new = run_max[qi] > gmax ? run_max[qi] : gmax;
        const float alpha = exp_scalar(run_max[qi] - m_new);
        vf pv = vexp(vsub(s, vset1(m_new)));
        run_sum[qi] = run_sum[qi] * alpha + hsum(pv);
        run_max[qi] = m_new;
        vstore(p, pv);
        const float* vg = vfb + static_cast<int64_t>(g0 - kb0) * hd;
        const vf va = vset1(alpha);
        for (int ch = 0; ch < HC; ++ch) {
          vf a = vmul(vload(o + ch * kLanes), va);
          for (int j = 0; j < nk; ++j) a = vfma(vset1(p[j]), vload(vg + j * hd + ch * kLanes), a);
          vstore(o + ch * kLanes, a);
        }
      }
    }
  }

  for (int32_t qi = 0; qi < nq; ++qi) {
    const int32_t row = t.t0 + qi / group, h = t.kv_head * group + qi % group;
    float* o = t.out + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
    const vf inv = vset1(1.0f / run_sum[qi]);
    for (int ch = 0; ch < HC; ++ch) vstore(o + ch * kLanes, vmul(vload(o + ch * kLanes), inv));
  }
}

inline void attention(const AttentionTask& t, float* scratch) {
  switch (t.cache->head_dim / kLanes * (t.cache->head_dim % kLanes == 0 ? 1 : 0)) {
    case 4: return attention_fast<4>(t, scratch);
    case 8: return attention_fast<8>(t, scratch);
    case 16: return attention_fast<16>(t, scratch);
    default: return attention_generic(t, scratch);
  }
}

}  // namespace pypto::cpu::PYPTO_ISA_NS
