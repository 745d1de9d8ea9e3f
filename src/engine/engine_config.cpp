#include "engine/engine_config.h"

#include "core/error.h"

namespace pypto {

void SchedulerConfig::validate() const {
  if (max_num_seqs < 1) fail("--max-num-seqs must be >= 1, got ", max_num_seqs);
  if (max_num_batched_tokens < 1) fail("--max-num-batched-tokens must be >= 1, got ", max_num_batched_tokens);
  if (max_model_len < 2) fail("--max-model-len must be >= 2 (one prompt and one output token), got ", max_model_len);
  if (long_prefill_token_threshold < 1)
    fail("--long-prefill-token-threshold must be >= 1, got ", long_prefill_token_threshold);
  if (max_num_batched_tokens < max_num_seqs)
    fail("--max-num-batched-tokens (", max_num_batched_tokens, ") must be >= --max-num-seqs (", max_num_seqs,
         ") so every running request can decode each step");
  if (!enable_chunked_prefill && max_num_batched_tokens < max_model_len)
    fail("without chunked prefill --max-num-batched-tokens (", max_num_batched_tokens,
         ") must be >= --max-model-len (", max_model_len, "): a whole prompt must fit one step");
  speculative.validate();
}

void CacheConfig::validate() const {
  if (block_size < 1 || block_size > 1024) fail("--block-size must be in [1, 1024], got ", block_size);
  if (num_blocks < 1) fail("the KV cache must have at least 1 block, got ", num_blocks);
  validate_state_snapshots();
}

void CacheConfig::validate_state_snapshots() const {
  if (state_snapshots < 0) fail("--state-snapshots must be >= 0, got ", state_snapshots);
  if (state_snapshot_interval != -1 && (state_snapshot_interval < 0 || state_snapshot_interval % block_size != 0))
    fail("--state-snapshot-interval must be 0 or a multiple of --block-size (", block_size, "), got ",
         state_snapshot_interval);
}

}  // namespace pypto
