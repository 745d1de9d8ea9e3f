#pragma once
// Progress of prompt prefill (issue 31): a 32K-token prompt is prefilled in chunks over many
// steps, so /metrics and the log show how far it has got.
//
//   - PrefillProgress (gauges, read at each /metrics scrape): the running requests whose prompt
//     is not computed yet, how many of their prompt tokens are in the cache (prefix-cache hits
//     included) and their prompts' length; and a counter of prompt tokens the model computed
//     (not hits; a preempted request's recompute counts again), whose rate is prefill throughput.
//   - A log line each time a long prompt (>= kLongPromptLogTokens) passes a multiple of
//     kPrefillLogStride computed tokens, and when it is done: tokens done / total, the share,
//     seconds since its first chunk and the rate since then.
#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>

#include "engine/request.h"

namespace pypto {

inline constexpr int64_t kLongPromptLogTokens = 4096;
inline constexpr int64_t kPrefillLogStride = 4096;

struct PrefillProgress {
  int64_t requests = 0;         // running requests with prompt tokens still to compute
  int64_t computed_tokens = 0;  // of their prompts, tokens whose KV is in the cache
  int64_t prompt_tokens = 0;    // their prompts' tokens
  int64_t computed_total = 0;   // counter: prompt tokens computed by the model since start
};

class PrefillTracker {
 public:
  // After a step advanced `req` from `computed_before` to req.num_computed_tokens: counts the
  // prompt tokens computed and logs a long prompt's progress.
  void on_step(const Request& req, int64_t computed_before);
  // The request left the running set (finished, aborted or preempted).
  void forget(const std::string& req_id) { started_.erase(req_id); }
  PrefillProgress progress(std::span<Request* const> running) const;

 private:
  struct Start {
    std::chrono::steady_clock::time_point time;
    int64_t computed = 0;  // prompt tokens in the cache after its first logged chunk
  };
  std::unordered_map<std::string, Start> started_;  // long prompts being prefilled
  int64_t computed_total_ = 0;
};

}  // namespace pypto
