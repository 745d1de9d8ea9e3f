#pragma once
// What the speculation cost model (engine/spec_cost_model.h) decided and why, for /metrics
// (pypto:spec_decode_*, serve/spec_decode_metrics.cpp), the --profile report and the offline
// summary. Counts cover decode steps where the model chose (some decoding request could draft).
#include <cstdint>
#include <vector>

namespace pypto {

struct SpecCostStats {
  bool cost_model = true;    // false: "cost_model": false, every request drafts its cap
  bool speculating = false;  // the current decision (not a probe): some request drafts
  int32_t last_k = 0;        // the largest k of the last step that chose
  std::vector<int64_t> chosen_k;  // [max_k + 1]: request-steps by the k chosen for the request
  // Steps where the model gave some request k > 0 (probes included; the drafter may still
  // propose nothing, e.g. no n-gram match), and steps where it gave every request k = 0.
  int64_t steps_speculating = 0;
  int64_t steps_plain = 0;
  int64_t probes = 0;             // steps that took the losing side to re-measure it
  // Estimates for the batch of the last step that chose (< 0: not measured yet): seconds of a
  // plain step and of the best speculative step (verify + drafting), and the tokens per second
  // each gives with the requests' acceptance.
  double plain_step_s = -1, spec_step_s = -1;
  double plain_tokens_per_s = -1, spec_tokens_per_s = -1;
};

}  // namespace pypto
