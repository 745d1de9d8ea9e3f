#include "engine/prefill_progress.h"

#include <algorithm>
#include <cstdio>

#include "core/log.h"

namespace pypto {

void PrefillTracker::on_step(const Request& req, int64_t computed_before) {
  const int64_t prompt = req.num_prompt_tokens();
  const int64_t before = std::min(computed_before, prompt);
  const int64_t after = std::min(req.num_computed_tokens, prompt);
  if (after <= before) return;  // decode, or drafts: no prompt tokens
  computed_total_ += after - before;
  if (prompt < kLongPromptLogTokens) return;
  const auto now = std::chrono::steady_clock::now();
  // The clock starts when the first chunk is done (the step's start is not seen here), so the
  // rate covers the chunks after it.
  auto it = started_.try_emplace(req.request_id, Start{now, after}).first;
  const bool done = after == prompt;
  if (!done && before / kPrefillLogStride == after / kPrefillLogStride) return;
  const double secs = std::chrono::duration<double>(now - it->second.time).count();
  const int64_t computed_here = after - it->second.computed;
  char line[160];
  // After the first chunk no time has passed yet: no rate.
  if (secs > 0)
    std::snprintf(line, sizeof line, "%lld / %lld prompt tokens (%.1f %%), %.1f s, %.0f tok/s", (long long)after,
                  (long long)prompt, 100.0 * double(after) / double(prompt), secs, double(computed_here) / secs);
  else
    std::snprintf(line, sizeof line, "%lld / %lld prompt tokens (%.1f %%)", (long long)after, (long long)prompt,
                  100.0 * double(after) / double(prompt));
  log_info("prefill ", req.request_id, ": ", line, done ? ", done" : "");
  if (done) started_.erase(it);
}

PrefillProgress PrefillTracker::progress(std::span<Request* const> running) const {
  PrefillProgress p;
  p.computed_total = computed_total_;
  for (const Request* r : running) {
    const int64_t prompt = r->num_prompt_tokens();
    if (r->num_computed_tokens >= prompt) continue;
    ++p.requests;
    p.computed_tokens += r->num_computed_tokens;
    p.prompt_tokens += prompt;
  }
  return p;
}

}  // namespace pypto
