#include "cli/bench_profile.h"

#include <cstdio>

#include "cli/profile_warmup.h"
#include "core/log.h"
#include "core/trace_json.h"

namespace pypto::cli {

ProfileSession::ProfileSession(const RunOptions& o, const LoadedEngine& le, const std::vector<std::vector<int32_t>>& prompts)
    : output_(o.profile_output), load_s_(le.load_seconds) {
  if (!o.profile) return;
  level_ = prof::parse_level(o.profile_level);
  // Warm-up: on every replica (--dp > 1 too), one request shaped like the first prompt
  // (synthetic ids, so it leaves nothing in the prefix cache that the real prompts could hit), a
  // few tokens, timed and then discarded.
  const size_t len = prompts.empty() ? 1 : std::max<size_t>(1, prompts[0].size());
  warmup_s_ = warm_up_replicas(replica_loops(le), len, le.config.vocab_size);
  prof::reset();
  prof::set_level(level_);
}

ProfileSession::~ProfileSession() {
  if (enabled()) prof::set_level(prof::Level::Off);
}

std::string ProfileSession::finish(double wall_s, int64_t output_tokens, const std::string& speculation) {
  if (!enabled()) return "";
  prof::set_level(prof::Level::Off);
  const prof::Trace trace = prof::collect();
  const prof::ProfileReport report = prof::analyze_trace(trace, level_);
  prof::RunInfo info;
  info.load_s = load_s_;
  info.warmup_s = warmup_s_;
  info.ttft_s = prof::request_ttfts_s(trace);
  info.output_tokens = output_tokens;
  info.wall_s = wall_s;
  info.speculation = speculation;
  const std::string text = prof::format_report(report, info);
  std::fputs(text.c_str(), stdout);
  if (!output_.empty()) {
    const std::string path = prof::trace_output_path(output_);
    prof::write_chrome_trace(trace, path);
    std::printf("trace: %s (%zu events; open in https://ui.perfetto.dev)\n", path.c_str(), trace.events.size());
  }
  std::fflush(stdout);
  return text;
}

}  // namespace pypto::cli
