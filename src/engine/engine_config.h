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

  void validate() const;
};

}  // namespace pypto
