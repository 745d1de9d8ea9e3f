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
// widened by widen_row, then for each L-key group row_scores, softmax_step and pv_update, blocks
// in order (row_path_block's sequence) — so a query's bits are the same in a multi-head task, a
// one-head task, alone or in a prefill chunk: only the order in which the heads' independent
// computations interleave changes, and the heads share nothing but the f32 block tile, rewritten
// per head. The interleaving is chosen for speed: per key group, the scores and softmax steps of
// all the KV head's query-heads, then their P·V in tiles of kAttnTile sharing each value load.
// One query-head at a time (row_path_block), each group's chain — scores, lane reduction, max,
// exp, sum, then P·V waiting on the probabilities — runs mostly serially; with the GQA group's
// heads side by side the out-of-order core overlaps their chains.
//
// GQA groups of 8 (the Qwen3.5 / 3.6 hybrids, Qwen3-30B-A3B): their one-row decode tasks come
// here even with one KV head (cpu_backend.cpp), not to attention_fast's column path, which would
// leave half of each query vector's lanes empty: at 32K on Qwen3-30B-A3B's heads ~0.78x the time
// (docs/status.md, issue 36). Tried and taken out: scoring and P·V straight from the cache rows
// (each K / V element converted once in registers for all 8 query-heads, no f32 tile): same bits,
// but 1.2-1.4x the CPU time of this tile at 32K, the cache-row loads then waiting between the
// FMAs where the widening loop reads a block's rows in one burst.
//
// Split along the sequence (t.partial set): the task computes one segment (kAttnSegmentBlocks
// cache blocks, t.seg) of its query-heads and leaves its (m, l, acc) in t.partial; once every
// segment of the sequence is done, attention_fold folds them in segment order into out — the
// same fold_segment calls, in the same order, as a task that walks all segments itself.
//
// A few rows (a speculative verify step's k + 1, kAttentionFewRowsMaxQueries): the task takes
// rows [t0, t1) of its sequence, each row's query-heads seeing the keys up to its own position;
// a KV head's query-heads of all the rows go side by side as a GQA group's do. Never split.
//
// Shapes: q, out [m, n_heads, HC·L]; rows [t0, t1) of the sequence (one row, its only one, when
// split); query-heads nq = (h1 - h0) · rows · group, at most kAttentionMaxQueries. A segment's
// partial: [nq] m, [nq] l, [nq, hd] acc (attention_partial_floats).

// How many cache blocks ahead a decode task prefetches (see the loop below). 4 measured up to 24 %
// less CPU time than one burst a block ahead at 32K, 2 in between (docs/status.md, issue 31).
constexpr int32_t kDecodePrefetchBlocks = 4;

// When a decode task leaves the prefetching to the hardware: fewer than kDecodePrefetchMinGroup
// query-heads per KV head (GQA group × rows; Qwen3-0.6B's groups of 2: two query-heads'
// arithmetic per K/V byte) and its heads' rows of a block (one run of K, one of V) at least
// kDecodeHwPrefetchRunBytes long. Such a task reads the cache about as fast as the hardware
// prefetchers stream runs that long, and the software prefetches (1,024 lines a block for 8 bf16
// heads of 128) take the core's miss slots from those streams. Measured (AMD EPYC Zen 5, 2
// threads, 16 alternating rounds, docs/status.md issue 31): without them a 32K decode of the
// 0.6B heads, bf16 (32 KiB runs), took 0.84× the time with shuffled blocks and 0.64× with blocks
// in order; with 16 KiB runs (int8 KV, or bf16 tasks of 4 heads at 4K) it took 1.07-1.3× and the
// hybrids' groups of 8 1.1-1.5×, so those keep them. A hint either way: no value changes.
constexpr int32_t kDecodePrefetchMinGroup = 4;
constexpr int64_t kDecodeHwPrefetchRunBytes = 32 * 1024;

// The fewest query-heads per KV head (GQA group × rows) that a decode task takes side by side
// (below it, one at a time, as row_path_block). Quiet runs on the AMD EPYC Zen 5 host at 32K
// (docs/status.md, issue 31): side by side 0.84x the time with the hybrids' groups of 8, but
// 1.05x with int8 KV and Qwen3-0.6B's groups of 2, where two chains give the core too little to
// overlap to pay for the extra probability stores. Same bits either way.
constexpr int32_t kDecodeSideBySideMinGroup = 4;

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
  const int32_t q0 = b.query_start[t.seq], q1 = b.query_start[t.seq + 1];
  const int32_t rows = t.t1 - t.t0, hq = rows * group;  // query-heads per KV head
  const int32_t nq = nh * hq;
  const bool split = t.partial != nullptr;
  PYPTO_ASSERT(q0 <= t.t0 && t.t0 < t.t1 && t.t1 <= q1 && nq <= kAttentionMaxQueries && (!split || rows == 1),
               "decode-heads task: rows [", t.t0, ", ", t.t1, ") of [", q0, ", ", q1, ") group ", group, " heads ", nh,
               split ? " split" : "");
  const int32_t ctx = b.context_len[t.seq];
  const int32_t first_pos = ctx - (q1 - q0);  // the position of the sequence's first query row
  const int32_t* table = b.block_tables + static_cast<int64_t>(t.seq) * b.max_blocks_per_seq;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  float* kf = scratch;                     // [round_lanes(bs), hd]  one head's keys of the block, f32
  float* vfb = kf + round_lanes(bs) * hd;  // [round_lanes(bs), hd]  its values
  float* run_max = vfb + round_lanes(bs) * hd;  // [kMaxQ]
  float* run_sum = run_max + kMaxQ;              // [kMaxQ]
  float* p = run_sum + kMaxQ;                    // [hq, L]  one key group's probabilities per query-head
  float* alpha = p + kMaxQ * L;                  // [hq]
  float* tot_max = alpha + kMaxQ;                // [kMaxQ]  folded segments (fold_segment)
  float* tot_sum = tot_max + kMaxQ;              // [kMaxQ]
  float* tot_acc = tot_sum + kMaxQ;              // [nq, hd]
  // [nq, hd]  running numerators of an unsplit task, contiguous in this thread's scratch rather
  // than in `out` (rows n_heads · hd floats apart, the other thread's heads in the same pages), as
  // attention_fast keeps them; copied to `out` at the end. Only storage: no value changes.
  float* oacc = tot_acc + static_cast<int64_t>(nq) * hd;
  PYPTO_ASSERT(oacc + static_cast<int64_t>(nq) * hd <= scratch + attention_scratch_floats(bs, hd),
               "decode-heads scratch");

  // Query-head qi = ((KV head - h0) · rows + row - t0) · group + head within the group: a KV
  // head's query-heads are consecutive. see[qi]: the keys it sees, [0, its position].
  const float* qp[kAttentionMaxQueries];
  float* op[kAttentionMaxQueries];    // its running numerator (oacc, or the split's partial)
  float* outp[kAttentionMaxQueries];  // its output row in `out`
  int32_t see[kAttentionMaxQueries];
  for (int32_t qi = 0; qi < nq; ++qi) {
    const int32_t hh = qi / hq, row = t.t0 + qi % hq / group, h = (h0 + hh) * group + qi % group;
    qp[qi] = t.q + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
    // Split: the segment's acc goes to its partial ([nq, hd] after [nq] m and [nq] l), not to out.
    op[qi] = split ? t.partial + 2 * nq + static_cast<int64_t>(qi) * hd : oacc + static_cast<int64_t>(qi) * hd;
    outp[qi] = t.out + (static_cast<int64_t>(row) * t.n_heads + h) * hd;
    see[qi] = first_pos + (row - q0) + 1;
    run_max[qi] = tot_max[qi] = -INFINITY;
    run_sum[qi] = tot_sum[qi] = 0.0f;
    for (int ch = 0; ch < HC; ++ch) {
      vstore(op[qi] + ch * L, vzero());
      vstore(tot_acc + qi * hd + ch * L, vzero());
    }
  }
  // Prefetch (a hint: no value changes). Block bi + kDecodePrefetchBlocks is fetched into L2
  // while block bi is computed, its lines issued a slice at a time before each query-head's work
  // on each head (nq slices): issued in one burst at the block's start, the prefetches
  // fill the core's miss queue and the core waits on them before computing, so memory time and
  // arithmetic add up instead of overlapping (the hybrids' 8 query-heads per KV head make the
  // arithmetic per byte as long as the transfer). Slice u of `slices` covers lines
  // [u · n / slices, (u + 1) · n / slices) of the heads' K run, the same of the V run, and the
  // 8-bit row scales with the first slice. Not for small groups over long runs (`prefetch`,
  // kDecodeHwPrefetchRunBytes above).
  const int64_t esize = c.dtype == DType::F32 ? 4 : (c.dtype == DType::BF16 ? 2 : 1);
  const int64_t run_lines = (static_cast<int64_t>(nh) * bs * hd * esize + 63) / 64;  // [nh, bs, hd]
  const int32_t slices = nq;
  auto prefetch_slice = [&](int64_t blk, int32_t u) __attribute__((always_inline)) {
    const char* kr = static_cast<const char*>(c.k) + c.row(blk, h0, 0) * esize;
    const char* vr = static_cast<const char*>(c.v) + c.row(blk, h0, 0) * esize;
    for (int64_t e = u * run_lines / slices; e < (u + 1) * run_lines / slices; ++e) {
      _mm_prefetch(kr + e * 64, _MM_HINT_T1);  // into L2, as attention_fast (T0 measured no faster)
      _mm_prefetch(vr + e * 64, _MM_HINT_T1);
    }
    if (c.k_scale && u == 0) {  // 8-bit: the rows' scales, [nh, bs] f32 each
      for (int64_t e = 0; e < static_cast<int64_t>(nh) * bs; e += 16) {
        _mm_prefetch(reinterpret_cast<const char*>(c.k_scale + c.scale_index(blk, h0, 0) + e), _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(c.v_scale + c.scale_index(blk, h0, 0) + e), _MM_HINT_T1);
      }
    }
  };

  // Blocks [b_begin, b_end): all the blocks the task's last row sees, or one segment's.
  const int32_t last_see = first_pos + (t.t1 - q0);
  const int32_t nblocks = (last_see + bs - 1) / bs;
  const int32_t b_begin = split ? t.seg * kAttnSegmentBlocks : 0;
  const int32_t b_end = split && (t.seg + 1) * kAttnSegmentBlocks < nblocks ? (t.seg + 1) * kAttnSegmentBlocks : nblocks;
  PYPTO_ASSERT(b_begin < b_end, "decode segment ", t.seg, " of a context of ", ctx);
  const bool prefetch = hq >= kDecodePrefetchMinGroup || run_lines * 64 < kDecodeHwPrefetchRunBytes;
  for (int32_t bi = b_begin; prefetch && bi < b_begin + kDecodePrefetchBlocks && bi < b_end; ++bi)
    for (int32_t u = 0; u < slices; ++u) prefetch_slice(table[bi], u);
  for (int32_t bi = b_begin; bi < b_end; ++bi) {
    const int32_t kb0 = bi * bs, nrows = last_see - kb0 < bs ? last_see - kb0 : bs;
    const int64_t block = table[bi];
    if (bi > b_begin && bi % kAttnSegmentBlocks == 0)  // a new segment (never within a split task)
      for (int32_t qi = 0; qi < nq; ++qi)
        if (see[qi] > kb0)  // a query-head that sees none of the segment has no segment to start
          next_segment(tot_max[qi], tot_sum[qi], tot_acc + qi * hd, run_max[qi], run_sum[qi], op[qi], hd);
    const bool ahead = prefetch && bi + kDecodePrefetchBlocks < b_end;
    const int64_t next_block = ahead ? table[bi + kDecodePrefetchBlocks] : 0;
    for (int32_t hh = 0; hh < nh; ++hh) {
      for (int32_t j = 0; j < nrows; ++j) widen_row<HC>(c, block, h0 + hh, j, kf + j * hd, vfb + j * hd);
      // Key rows past the block's end up to a whole group: zeros (masked in the softmax anyway).
      for (int32_t j = nrows; j < round_lanes(nrows); ++j)
        for (int ch = 0; ch < HC; ++ch) vstore(kf + j * hd + ch * L, vzero());
      const int32_t qh = hh * hq;  // the head's first query-head
      // Keys of the block query-head qh + i sees (<= 0: none; rows are in position order).
      auto block_keys = [&](int32_t i) { return see[qh + i] - kb0 < nrows ? see[qh + i] - kb0 : nrows; };
      if (hq < kDecodeSideBySideMinGroup) {  // one query-head at a time: row_path_block itself
        for (int32_t i = 0; i < hq; ++i) {
          if (ahead) prefetch_slice(next_block, qh + i);
          const int32_t nk = block_keys(i);
          if (nk > 0) row_path_block<HC>(qp[qh + i], op[qh + i], kf, vfb, nk, scale, run_max[qh + i], run_sum[qh + i], p);
        }
        continue;
      }
      // The row path's arithmetic for each query-head of the KV head (row_path_block), in three
      // passes over them so that the heads' independent dependency chains overlap: all scores
      // and softmax steps, then P·V with each value load shared by up to kAttnTile query-heads
      // that see the same keys of the group (pv_update: the same FMA order for any number of
      // heads). A block holds block_size keys: L-key groups in order, as row_path_block walks them.
      for (int32_t g0 = 0; g0 < nrows; g0 += L) {
        const float* kg = kf + static_cast<int64_t>(g0) * hd;
        int32_t gk[kAttentionMaxQueries];  // keys of this group each query-head sees
        for (int32_t i = 0; i < hq; ++i) {
          if (ahead && g0 == 0) prefetch_slice(next_block, qh + i);
          const int32_t nk = block_keys(i) - g0;
          gk[i] = nk < L ? nk : L;
          if (gk[i] <= 0) continue;
          const vf sc = row_scores<HC>(qp[qh + i], kg, scale);
          vstore(p + i * L, softmax_step(sc, gk[i], run_max[qh + i], run_sum[qh + i], alpha[i]));
        }
        pv_same_keys<HC>(hq, [&](int32_t i) { return gk[i]; }, op + qh, alpha, p, L, 1, vfb + static_cast<int64_t>(g0) * hd);
      }
    }
  }

  if (split) {
    for (int32_t qi = 0; qi < nq; ++qi) {
      t.partial[qi] = run_max[qi];
      t.partial[nq + qi] = run_sum[qi];
    }
    return;
  }
  for (int32_t qi = 0; qi < nq; ++qi) {
    finish_query(tot_max[qi], tot_sum[qi], tot_acc + qi * hd, run_max[qi], run_sum[qi], op[qi], hd);
    for (int ch = 0; ch < HC; ++ch) vstore(outp[qi] + ch * L, vload(op[qi] + ch * L));
  }
}

// The segments 0 .. nseg - 1 of a split decode task (t.partial: the first segment's partial, the
// others following, attention_partial_floats apart) folded in order into out: the arithmetic of
// the fold_segment / finish_query calls of an unsplit task.
inline void attention_fold(const AttentionTask& t, int32_t nseg) {
  const KvCacheLayer& c = *t.cache;
  const int32_t hd = c.head_dim, group = t.n_heads / c.n_kv_heads;
  const int32_t nq = (t.kv_head_end - t.kv_head) * group;
  const int64_t stride = static_cast<int64_t>(nq) * (hd + 2);
  float* out = t.out + (static_cast<int64_t>(t.t0) * t.n_heads + t.kv_head * group) * hd;  // [nq, hd]
  for (int32_t qi = 0; qi < nq; ++qi) {
    float* o = out + static_cast<int64_t>(qi) * hd;  // A, the total, in place
    for (int32_t e = 0; e < hd; e += kLanes) vstore_n(o + e, vzero(), hd - e < kLanes ? hd - e : kLanes);
    float M = -INFINITY, Ls = 0.0f;
    for (int32_t sg = 0; sg < nseg; ++sg) {
      const float* part = t.partial + sg * stride;
      fold_segment(M, Ls, o, part[qi], part[nq + qi], part + 2 * nq + static_cast<int64_t>(qi) * hd, hd);
    }
    const vf inv = vset1(1.0f / Ls);
    for (int32_t e = 0; e < hd; e += kLanes) {
      const int n = hd - e < kLanes ? hd - e : kLanes;
      vstore_n(o + e, vmul(vload_n(o + e, n), inv), n);
    }
  }
}
