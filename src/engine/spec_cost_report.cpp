#include "engine/spec_cost_report.h"

#include <cstdio>

namespace pypto {

std::string format_spec_decode_section(const SpecDecodeStats& a, const SpecCostStats& c) {
  std::string o;
  char b[256];
  auto line = [&](const char* fmt, auto... v) {
    std::snprintf(b, sizeof b, fmt, v...);
    o += b;
    o += '\n';
  };
  line("  acceptance                %lld of %lld draft tokens (%.1f %%), %lld verifies, mean acceptance length %.2f",
       static_cast<long long>(a.num_accepted_tokens), static_cast<long long>(a.num_draft_tokens),
       100.0 * a.acceptance_rate(), static_cast<long long>(a.num_drafts), a.mean_acceptance_length());
  if (!c.cost_model) {
    line("  cost model                off (\"cost_model\": false): every request drafts its throttled k");
    return o;
  }
  const int64_t steps = c.steps_speculating + c.steps_plain;
  line("  decode steps              %lld with k > 0, %lld plain (%.1f %% with k > 0), %lld probes",
       static_cast<long long>(c.steps_speculating), static_cast<long long>(c.steps_plain),
       steps ? 100.0 * double(c.steps_speculating) / double(steps) : 0.0, static_cast<long long>(c.probes));
  std::string ks;
  for (size_t k = 0; k < c.chosen_k.size(); ++k)
    ks += (k ? ", " : "") + std::string("k=") + std::to_string(k) + ": " + std::to_string(c.chosen_k[k]);
  line("  chosen k (request-steps)  %s", ks.c_str());
  line("  decision now              %s (last step's largest k %d)", c.speculating ? "speculate" : "plain", c.last_k);
  if (c.plain_step_s >= 0)
    line("  estimated plain step      %.3f ms, %.1f tokens/s", c.plain_step_s * 1e3, c.plain_tokens_per_s);
  if (c.spec_step_s >= 0)
    line("  estimated best spec step  %.3f ms, %.1f tokens/s (%.3fx plain)", c.spec_step_s * 1e3, c.spec_tokens_per_s,
         c.plain_tokens_per_s > 0 ? c.spec_tokens_per_s / c.plain_tokens_per_s : 0.0);
  return o;
}

}  // namespace pypto
