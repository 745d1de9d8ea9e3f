#include "engine/spec_request_stats.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

SpecStatsLevel parse_spec_stats_level(const std::string& name) {
  if (name == "none") return SpecStatsLevel::None;
  if (name == "summary") return SpecStatsLevel::Summary;
  if (name == "detailed") return SpecStatsLevel::Detailed;
  fail("--per-request-spec-decode-stats: '", name, "' is not a level; allowed: none, summary, detailed");
}

SpecRequestStats::SpecRequestStats(int32_t k, SpecStatsLevel level)
    : num_spec_tokens(std::max(0, k)),
      detailed(level == SpecStatsLevel::Detailed),
      acceptance_histogram(size_t(std::max(0, k)) + 1, 0) {}

void SpecRequestStats::observe(int64_t drafted, int64_t accepted) {
  if (drafted <= 0) return;
  ++num_spec_steps;
  num_draft_tokens += drafted;
  num_accepted_draft_tokens += accepted;
  // accepted <= drafted <= k always; a larger count (a drafter past the configured k) widens the
  // histogram rather than being lost.
  if (size_t(accepted) >= acceptance_histogram.size()) acceptance_histogram.resize(size_t(accepted) + 1, 0);
  ++acceptance_histogram[size_t(accepted)];
  if (detailed) {
    draft_tokens_per_step.push_back(int32_t(drafted));
    accepted_draft_tokens_per_step.push_back(int32_t(accepted));
  }
}

double SpecRequestStats::mean_acceptance_length() const {
  return num_spec_steps ? 1.0 + double(num_accepted_draft_tokens) / double(num_spec_steps) : 0.0;
}

double SpecRequestStats::draft_acceptance_rate() const {
  return num_draft_tokens ? double(num_accepted_draft_tokens) / double(num_draft_tokens) : 0.0;
}

nlohmann::ordered_json spec_request_stats_json(const SpecRequestStats& s) {
  nlohmann::ordered_json j;
  j["mean_acceptance_length"] = s.mean_acceptance_length();
  j["draft_acceptance_rate"] = s.draft_acceptance_rate();
  j["acceptance_histogram"] = s.acceptance_histogram;
  j["num_spec_steps"] = s.num_spec_steps;
  j["num_accepted_draft_tokens"] = s.num_accepted_draft_tokens;
  j["num_draft_tokens"] = s.num_draft_tokens;
  j["num_spec_tokens"] = s.num_spec_tokens;
  if (s.detailed) {
    j["draft_tokens_per_step"] = s.draft_tokens_per_step;
    j["accepted_draft_tokens_per_step"] = s.accepted_draft_tokens_per_step;
  }
  return j;
}

}  // namespace pypto
