#pragma once
// --profile in offline mode: a warm-up request first (excluded), recording at --profile-level
// during generation, then the timing report on stdout and, with --profile-output, the Chrome /
// Perfetto trace file. Two calls in the offline driver:
//   ProfileSession profile(options, loaded_engine, prompts);   // after load_engine
//   profile.finish(wall_seconds, output_tokens);                // after generation
#include <cstdint>
#include <string>
#include <vector>

#include "cli/run_options.h"
#include "core/profile_report.h"
#include "core/profiler.h"

namespace pypto::cli {

class ProfileSession {
 public:
  ProfileSession(const RunOptions& o, const LoadedEngine& le, const std::vector<std::vector<int32_t>>& prompts);
  ~ProfileSession();  // recording off
  bool enabled() const { return level_ != prof::Level::Off; }
  // Prints the report (stdout) and writes the trace. Returns the report text ("" when off).
  // `speculation`: the report's speculative-decoding section (engine/spec_cost_report.h), or "".
  std::string finish(double wall_s, int64_t output_tokens, const std::string& speculation = "");

 private:
  prof::Level level_ = prof::Level::Off;
  std::string output_;
  double load_s_ = 0, warmup_s_ = -1;
};

}  // namespace pypto::cli
