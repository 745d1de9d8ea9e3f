#pragma once
// The per-step input of one forward call (vLLM's names): the new tokens of several sequences,
// packed back to back, plus where each token sits (position), where its K/V goes in the paged
// cache (slot_mapping) and which rows need logits. A plain struct with no globals: the engine's
// ModelRunner fills one per step, clear() keeps the vectors' capacity, so a steady state
// allocates nothing.
#include <cstdint>
#include <vector>

#include "kernels/backend.h"

namespace pypto {

struct ForwardBatch {
  // Per token, T = num_tokens() rows:
  std::vector<int32_t> token_ids;     // [T]
  std::vector<int32_t> positions;     // [T] absolute position within its sequence
  std::vector<int64_t> slot_mapping;  // [T] cache slot = block_id * block_size + offset
  // Per sequence (AttentionBatch): sequence i owns rows [query_start[i], query_start[i+1]).
  std::vector<int32_t> query_start;   // [num_seqs + 1], query_start[0] == 0
  std::vector<int32_t> context_len;   // [num_seqs] cached tokens including this step's
  std::vector<int32_t> block_tables;  // [num_seqs, max_blocks_per_seq] physical block ids
  int32_t max_blocks_per_seq = 0;
  // Rows whose logits are computed, in output order: logits_out row r is token row
  // logits_indices[r] (usually each sequence's last row; every row for the `logits` tool).
  std::vector<int32_t> logits_indices;
  // Hybrid models (Gated DeltaNet layers): per sequence, the slot of its recurrent state in the
  // model's state pool ([num_seqs]); empty for the other architectures. A sequence whose first
  // new token is at position 0 starts from a zero state; any other must continue exactly where
  // its slot's state ends (model/gdn_state.h).
  std::vector<int32_t> state_slots;
  // Hybrid models with prefix caching (model/gdn_state.h's snapshot entries): per sequence, the
  // entry its slot's state is restored from before the step, its first new token sitting right
  // after the snapshot's prefix (-1: none; the vector may be empty when no sequence restores);
  // and the snapshots the step takes: after the first `rows` (1..n) new tokens of sequence `seq`,
  // its state is copied into entry `entry`. Ordered by (seq, rows), rows strictly increasing
  // within a sequence.
  std::vector<int32_t> state_restore;
  struct StateSave {
    int32_t seq = 0, rows = 0, entry = 0;
  };
  std::vector<StateSave> state_saves;
  // Hybrid models with speculative decoding (model/gdn_rollback.h): per sequence, how many of its
  // last rows are drafts under verification (0: none; the vector may be empty when no sequence
  // verifies). The step keeps the state after each row before them, so a rejected draft can be
  // rolled back from.
  std::vector<int32_t> draft_rows;

  int64_t num_tokens() const { return static_cast<int64_t>(token_ids.size()); }
  int32_t num_seqs() const { return query_start.empty() ? 0 : static_cast<int32_t>(query_start.size()) - 1; }
  int64_t num_logits() const { return static_cast<int64_t>(logits_indices.size()); }

  void clear() {
    token_ids.clear();
    positions.clear();
    slot_mapping.clear();
    query_start.clear();
    context_len.clear();
    block_tables.clear();
    logits_indices.clear();
    state_slots.clear();
    state_restore.clear();
    state_saves.clear();
    draft_rows.clear();
    max_blocks_per_seq = 0;
  }

  // Appends one sequence's new tokens `ids[0..n)` at positions start..start+n-1 over a cached
  // prefix of `start` tokens, whose blocks are `blocks[0..n_blocks)` (covering start + n tokens).
  // `max_blocks_per_seq` must be set before the first call; `want_logits` selects the rows whose
  // logits are wanted: none, the last, or all.
  enum class Logits { None, Last, All };
  void add_sequence(const int32_t* ids, int32_t n, int32_t start, const int32_t* blocks, int32_t n_blocks,
                    int32_t block_size, Logits want_logits);

  AttentionBatch attention() const {
    AttentionBatch a;
    a.num_seqs = num_seqs();
    a.query_start = query_start.data();
    a.context_len = context_len.data();
    a.block_tables = block_tables.data();
    a.max_blocks_per_seq = max_blocks_per_seq;
    return a;
  }

  // Checks the invariants the kernels rely on (sizes agree, rows ordered, slots inside the cache,
  // positions consistent with context_len); aborts with a message on violation.
  void validate(int64_t num_cache_blocks, int32_t block_size) const;
};

}  // namespace pypto
