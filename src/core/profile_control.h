#pragma once
// Start/stop of recording for serve mode's POST /start_profile and /stop_profile (and anything
// else that records a window of a running engine). Both are idempotent and thread-safe: a second
// start while recording changes nothing; stop when not recording returns an empty path. When stop
// returns, the trace file is complete and valid.
#include <cstddef>
#include <string>

#include "core/profiler.h"

namespace pypto::prof {

struct StopResult {
  std::string path;      // the trace file written ("" when nothing was recording)
  size_t events = 0;
};

// Returns false when a recording was already running (then nothing changes).
bool start_recording(Level level);
// Stops, collects and writes the trace under `output` (DIR or FILE.json; trace_output_path).
StopResult stop_recording(const std::string& output);
bool recording();

}  // namespace pypto::prof
