#pragma once
// Engine limits (the CLI's --max-num-seqs, --max-num-batched-tokens, --max-model-len,
// --enable-chunked-prefill, --long-prefill-token-threshold, --block-size,
// --enable-prefix-caching) with start-up validation.
#include <cstdint>

#include "engine/speculative_config.h"

namespace pypto {

struct SchedulerConfig {
  int32_t max_num_seqs = 16;               // requests running at once
  int64_t max_num_batched_tokens = 4096;   // token budget of one step
  int64_t max_model_len = 4096;            // prompt + output tokens of one request
  bool enable_chunked_prefill = true;
  int64_t long_prefill_token_threshold = 2048;  // largest chunk one request gets per step
  // --speculative-config: drafts verified as k + 1 rows of a decoding request (off by default).
  SpeculativeConfig speculative;

  // Throws Error naming the flag and its allowed values.
  void validate() const;
};

struct CacheConfig {
  int32_t block_size = 16;  // tokens per KV block (16 on CPU)
  int32_t num_blocks = 0;   // from the KV capacity plan
  bool enable_prefix_caching = true;
  // Models with a per-sequence recurrent state (the hybrids' Gated DeltaNet layers): a prefix-cache
  // hit resumes only where a snapshot of that state exists (engine/state_snapshots.h). The model
  // holds state_snapshots entries (--state-snapshots); besides each chunk's last block boundary,
  // one is taken every state_snapshot_interval tokens (--state-snapshot-interval: a multiple of
  // block_size; 0: chunk ends only; -1: kDefaultSnapshotBlocks blocks). With recurrent_state and
  // no entries, prefix caching never hits.
  static constexpr int64_t kDefaultSnapshotBlocks = 64;
  bool recurrent_state = false;
  int32_t state_snapshots = 0;
  int64_t state_snapshot_interval = -1;
  // The interval in tokens (-1 resolved).
  int64_t snapshot_interval_tokens() const {
    return state_snapshot_interval < 0 ? kDefaultSnapshotBlocks * block_size : state_snapshot_interval;
  }

  void validate() const;
  // The --state-snapshots / --state-snapshot-interval part of validate(), checkable before the
  // KV pool is planned.
  void validate_state_snapshots() const;
};

}  // namespace pypto
