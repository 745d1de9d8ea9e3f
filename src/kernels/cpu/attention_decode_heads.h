#pragma once
// Decode attention over several KV heads per task (included by attention_impl.h, in the ISA
// namespace, after attention_fast).
//
// Why: one decode task of attention_fast reads one KV head's rows of each cache block: with the
// head-major blocks ([block, kv head, slot, head_dim], backend.h) a 16-token bf16 block at
// head_dim 128 gives a 4 KiB run for K and one for V, each in a block that lies anywhere in the
// pool. On the AMD EPYC Zen 5 host such shuffled 4 KiB runs read at about half the rate of 32 KiB
// runs even as a plain read loop (BM_RunReadBandwidth), so a long-context decode streams its
// cache well below the bandwidth. A task over the KV heads [h0, h1) of one decode row reads each
// block's rows of those heads as one run of (h1 - h0) · block_size · row_bytes bytes (and so for
// V), and prefetches the next block's run while it works.
//
// Arithmetic: exactly attention_fast's row path, per query-head — the block's rows of one head
// widened by widen_row, then row_path_block over the block's keys, blocks in order — so a query's
// bits are the same in a multi-head task, a one-head task, alone or in a prefill chunk: only the
// order in which the heads' independent computations interleave changes, and the heads share
// nothing but the f32 block tile, rewritten per head.
//
// Shapes: q, out [m, n_heads, HC·L]; the task's row t0 is its sequence's only query (position
// context_len - 1, so it sees every key of every block); query-heads (h0 · group ..
// h1 · group), at most kAttentionMaxQueries, each with fewer than kAttnColsMin per KV head.

template <int HC>
inline void attention_decode_heads(const AttentionTask& t, float* scratch) {
  constexpr int L = kLanes;
  constexpr int32_t hd = HC * L;
  constexpr int kMaxQ = kAttentionMaxQueries + kLanes;
  const KvCacheLayer& c = *t.cache;
  const AttentionBatch& b = *t.batch;
  const int32_t bs = c.block_size;
  const int32_t group = t.n_heads / c.n_kv_heads;
  const int32_t h0 = t.kv_head, nh = t.kv_head_end - t.kv_head;
  const int32_t nq = nh * group;
  PYPTO_ASSERT(t.t1 == t.t0 + 1 && b.query_start[t.seq + 1] - b.query_start[t.seq] == 1 && nq <= kAttentionMaxQueries &&
                   group < kAttnColsMin,
               "decode-heads task: rows [", t.t0, ", ", t.t1, ") group ", group, " heads ", nh);
  const int32_t ctx = b.context_len[t.seq];
  const int32_t* table = b.block_tables + static_cast<int64_t>(t.seq) * b.max_blocks_per_seq;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  float* kf = scratch;                     // [round_lanes(bs), hd]  one head's keys of the block, f32
  float* vfb = kf + round_lanes(bs) * hd;  // [round_lanes(bs), hd]  its values
  float* run_max = vfb + round_lanes(bs) * hd;  // [kMaxQ]
  float* run_sum = run_max + kMaxQ;              // [kMaxQ]
  float* p = run_sum + kMaxQ;                    // [L]

  // Query-head qi = (KV head - h0) · group + head within the group.
  const float* q = t.q + (static_cast<int64_t>(t.t0) * t.n_heads + h0 * group) * hd;  // [nq, hd]
  float* out = t.out + (static_cast<int64_t>(t.t0) * t.n_heads + h0 * group) * hd;  // [nq, hd]
  for (int32_t qi = 0; qi < nq; ++qi) {
    run_max[qi] = -INFINITY;
    run_sum[qi] = 0.0f;
    for (int ch = 0; ch < HC; ++ch) vstore(out + qi * hd + ch * L, vzero());
  }
  // The task's heads' rows of a block: [nh, bs, hd] elements from row(block, h0, 0), contiguous.
  const int64_t esize = c.dtype == DType::F32 ? 4 : (c.dtype == DType::BF16 ? 2 : 1);
  const int64_t run_bytes = static_cast<int64_t>(nh) * bs * hd * esize;
  auto prefetch_block = [&](int64_t blk) __attribute__((always_inline)) {
    const char* kr = static_cast<const char*>(c.k) + c.row(blk, h0, 0) * esize;
    const char* vr = static_cast<const char*>(c.v) + c.row(blk, h0, 0) * esize;
    for (int64_t e = 0; e < run_bytes; e += 64) {
      _mm_prefetch(kr + e, _MM_HINT_T1);  // into L2, as attention_fast (T0 measured no faster)
      _mm_prefetch(vr + e, _MM_HINT_T1);
    }
    if (c.k_scale) {  // 8-bit: the rows' scales, [nh, bs] f32 each
      for (int64_t e = 0; e < static_cast<int64_t>(nh) * bs; e += 16) {
        _mm_prefetch(reinterpret_cast<const char*>(c.k_scale + c.scale_index(blk, h0, 0) + e), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(c.v_scale + c.scale_index(blk, h0, 0) + e), _MM_HINT_T1);
      }
    }
  };

  const int32_t nblocks = (ctx + bs - 1) / bs;
  for (int32_t bi = 1; bi < kAttnPrefetchBlocks && bi < nblocks; ++bi) prefetch_block(table[bi]);
  for (int32_t bi = 0; bi < nblocks; ++bi) {
    const int32_t kb0 = bi * bs, nrows = ctx - kb0 < bs ? ctx - kb0 : bs;
    const int64_t block = table[bi];
    if (bi + kAttnPrefetchBlocks < nblocks) prefetch_block(table[bi + kAttnPrefetchBlocks]);
    for (int32_t hh = 0; hh < nh; ++hh) {
      for (int32_t j = 0; j < nrows; ++j) widen_row<HC>(c, block, h0 + hh, j, kf + j * hd, vfb + j * hd);
      // Key rows past the block's end up to a whole group: zeros (masked in the softmax anyway).
      for (int32_t j = nrows; j < round_lanes(nrows); ++j)
        for (int ch = 0; ch < HC; ++ch) vstore(kf + j * hd + ch * L, vzero());
      for (int32_t gi = 0; gi < group; ++gi) {
        const int32_t qi = hh * group + gi;
        row_path_block<HC>(q + qi * hd, out + qi * hd, kf, vfb, nrows, scale, run_max[qi], run_sum[qi], p);
      }
    }
  }

  for (int32_t qi = 0; qi < nq; ++qi) {
    const vf inv = vset1(1.0f / run_sum[qi]);
    for (int ch = 0; ch < HC; ++ch) vstore(out + qi * hd + ch * L, vmul(vload(out + qi * hd + ch * L), inv));
  }
}
