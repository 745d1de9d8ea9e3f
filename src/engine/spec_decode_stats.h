#pragma once
// Speculative-decoding counters, with the meaning of vLLM's Prometheus counters of the same names
// (serve/metrics.cpp exports them as vllm:spec_decode_*):
//   num_drafts           request-steps that verified >= 1 draft token
//   num_draft_tokens     draft tokens verified
//   num_accepted_tokens  draft tokens accepted (the target's own token after them not counted)
//   accepted_per_pos[i]  verifies that accepted the draft at position i (so accepted > i)
// Mean acceptance length = 1 + num_accepted_tokens / num_drafts (tokens per verify step).
#include <cstdint>
#include <vector>

namespace pypto {

// Tokens a drafter looked up in its own prefix cache and found there.
struct DraftPrefixCacheStats {
  int64_t queried_tokens = 0;
  int64_t hit_tokens = 0;
};

struct SpecDecodeStats {
  int64_t num_drafts = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_tokens = 0;
  std::vector<int64_t> accepted_per_pos;
  // A drafter with a prefix cache of its own (the draft model's, engine/draft_kv_blocks.h): tokens
  // looked up and found there, as the target's prefix-cache queries and hits count (0 otherwise).
  DraftPrefixCacheStats draft_prefix_cache;

  void observe(int64_t drafted, int64_t accepted) {
    if (drafted <= 0) return;
    ++num_drafts;
    num_draft_tokens += drafted;
    num_accepted_tokens += accepted;
    if (int64_t(accepted_per_pos.size()) < drafted) accepted_per_pos.resize(size_t(drafted), 0);
    for (int64_t i = 0; i < accepted; ++i) ++accepted_per_pos[size_t(i)];
  }
  double acceptance_rate() const { return num_draft_tokens ? double(num_accepted_tokens) / double(num_draft_tokens) : 0; }
  double mean_acceptance_length() const { return num_drafts ? 1.0 + double(num_accepted_tokens) / double(num_drafts) : 0; }
};

}  // namespace pypto
