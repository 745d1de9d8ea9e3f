#include "model/forward_batch.h"

#include "core/error.h"

namespace pypto {

void ForwardBatch::add_sequence(const int32_t* ids, int32_t n, int32_t start, const int32_t* blocks,
                                int32_t n_blocks, int32_t block_size, Logits want_logits) {
  PYPTO_ASSERT(n > 0 && start >= 0 && block_size > 0);
  PYPTO_ASSERT(max_blocks_per_seq > 0, "set max_blocks_per_seq first");
  PYPTO_ASSERT(n_blocks <= max_blocks_per_seq, n_blocks, " blocks > max ", max_blocks_per_seq);
  PYPTO_ASSERT(int64_t(n_blocks) * block_size >= int64_t(start) + n, "blocks do not cover the sequence");
  if (query_start.empty()) query_start.push_back(0);
  const int32_t row0 = query_start.back();
  for (int32_t i = 0; i < n; ++i) {
    const int32_t pos = start + i;
    token_ids.push_back(ids[i]);
    positions.push_back(pos);
    slot_mapping.push_back(int64_t(blocks[pos / block_size]) * block_size + pos % block_size);
  }
  query_start.push_back(row0 + n);
  context_len.push_back(start + n);
  for (int32_t b = 0; b < max_blocks_per_seq; ++b) block_tables.push_back(b < n_blocks ? blocks[b] : 0);
  if (want_logits == Logits::Last) {
    logits_indices.push_back(row0 + n - 1);
  } else if (want_logits == Logits::All) {
    for (int32_t i = 0; i < n; ++i) logits_indices.push_back(row0 + i);
  }
}

void ForwardBatch::validate(int64_t num_cache_blocks, int32_t block_size) const {
  const int64_t T = num_tokens();
  const int32_t S = num_seqs();
  PYPTO_ASSERT(int64_t(positions.size()) == T && int64_t(slot_mapping.size()) == T, "per-token sizes differ");
  PYPTO_ASSERT(int64_t(context_len.size()) == S, "context_len size");
  PYPTO_ASSERT(int64_t(block_tables.size()) == int64_t(S) * max_blocks_per_seq, "block_tables size");
  PYPTO_ASSERT(S == 0 || (query_start[0] == 0 && query_start[S] == T), "query_start does not span the rows");
  for (int32_t s = 0; s < S; ++s) {
    const int32_t q0 = query_start[s], q1 = query_start[s + 1];
    PYPTO_ASSERT(q1 > q0, "sequence ", s, " has no rows");
    PYPTO_ASSERT(context_len[s] >= q1 - q0, "sequence ", s, " context shorter than its new tokens");
    PYPTO_ASSERT(int64_t(context_len[s]) <= int64_t(max_blocks_per_seq) * block_size, "context exceeds block table");
    for (int32_t r = q0; r < q1; ++r) {
      // Row r is the (r - q0)-th of the sequence's new tokens, which end at context_len - 1.
      PYPTO_ASSERT(positions[r] == context_len[s] - (q1 - q0) + (r - q0), "row ", r, " position mismatch");
      PYPTO_ASSERT(slot_mapping[r] >= 0 && slot_mapping[r] < num_cache_blocks * block_size, "row ", r, " slot outside the cache");
    }
    for (int32_t b = 0; b < (context_len[s] + block_size - 1) / block_size; ++b) {
      const int32_t id = block_tables[int64_t(s) * max_blocks_per_seq + b];
      PYPTO_ASSERT(id >= 0 && id < num_cache_blocks, "sequence ", s, " block ", b, " id ", id, " outside the cache");
    }
  }
  PYPTO_ASSERT(state_slots.empty() || int32_t(state_slots.size()) == S, "state_slots size");
  PYPTO_ASSERT(state_restore.empty() || int32_t(state_restore.size()) == S, "state_restore size");
  PYPTO_ASSERT(draft_rows.empty() || int32_t(draft_rows.size()) == S, "draft_rows size");
  for (size_t s = 0; s < draft_rows.size(); ++s)
    PYPTO_ASSERT(draft_rows[s] >= 0 && draft_rows[s] < query_start[s + 1] - query_start[s], "sequence ", s, ": ",
                 draft_rows[s], " draft rows in ", query_start[s + 1] - query_start[s]);
  for (size_t i = 0; i < state_saves.size(); ++i) {
    const StateSave& v = state_saves[i];
    PYPTO_ASSERT(v.seq >= 0 && v.seq < S && v.rows >= 1 && v.rows <= query_start[v.seq + 1] - query_start[v.seq],
                 "state save ", i, " (sequence ", v.seq, ", ", v.rows, " rows) outside the batch");
    PYPTO_ASSERT(i == 0 || state_saves[i - 1].seq < v.seq || (state_saves[i - 1].seq == v.seq && state_saves[i - 1].rows < v.rows),
                 "state saves out of order at ", i);
  }
  for (int32_t r : logits_indices) PYPTO_ASSERT(r >= 0 && r < T, "logits index ", r, " outside [0, ", T, ")");
}

}  // namespace pypto
