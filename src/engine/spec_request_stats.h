#pragma once
// Per-request speculative-decoding counts (--per-request-spec-decode-stats, docs/api.md): what one
// sequence's verify steps drafted and accepted, with the meaning of the engine's counters
// (engine/spec_decode_stats.h), so that the sums over every sequence equal /metrics'
// vllm:spec_decode_num_{drafts,draft_tokens,accepted_tokens}_total:
//   num_spec_steps             verify steps of this sequence with >= 1 draft token (num_drafts)
//   num_draft_tokens           draft tokens verified
//   num_accepted_draft_tokens  draft tokens accepted (the target's own token after them not counted)
//   num_spec_tokens            k, the configured num_speculative_tokens (the most drafts in a step)
//   acceptance_histogram[a]    verify steps that accepted exactly a drafts, a = 0..k
//   mean_acceptance_length     1 + accepted / steps (tokens per verify step); 0 with no steps
//   draft_acceptance_rate      accepted / draft tokens; 0 with no draft tokens
// `detailed` adds the drafted and accepted counts of every verify step, in order.
//
// The engine carries each step's counts on its outputs (RequestOutput::num_draft_tokens, ...);
// the front ends (serve/generation.cpp, cli/offline.cpp) add them up per sequence.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pypto {

enum class SpecStatsLevel { None, Summary, Detailed };

// "none" | "summary" | "detailed"; Error naming the allowed values otherwise.
SpecStatsLevel parse_spec_stats_level(const std::string& name);

struct SpecRequestStats {
  int32_t num_spec_tokens = 0;  // k
  bool detailed = false;
  int64_t num_spec_steps = 0;
  int64_t num_draft_tokens = 0;
  int64_t num_accepted_draft_tokens = 0;
  std::vector<int64_t> acceptance_histogram;  // [k + 1]
  std::vector<int32_t> draft_tokens_per_step;           // detailed: [num_spec_steps]
  std::vector<int32_t> accepted_draft_tokens_per_step;  // detailed: [num_spec_steps]

  SpecRequestStats() = default;
  SpecRequestStats(int32_t k, SpecStatsLevel level);

  // One step of the sequence: `drafted` drafts verified, `accepted` of them accepted. A step
  // without drafts (drafted 0: a plain decode or prefill step) counts nothing, as in the engine.
  void observe(int64_t drafted, int64_t accepted);
  double mean_acceptance_length() const;
  double draft_acceptance_rate() const;
};

// The `speculative_decoding_stats` object of a response choice (docs/api.md).
nlohmann::ordered_json spec_request_stats_json(const SpecRequestStats& s);

}  // namespace pypto
