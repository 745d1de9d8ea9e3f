#pragma once
// Chrome trace-event JSON (the format chrome://tracing and ui.perfetto.dev open) from a recorded
// prof::Trace: complete ("X") events with microsecond timestamps, plus process/thread name
// metadata so each engine thread and each request is a named track.
#include <string>

#include "core/profiler.h"

namespace pypto::prof {

std::string chrome_trace_json(const Trace& t);
// Writes it to `path`; Error naming the path when it cannot.
void write_chrome_trace(const Trace& t, const std::string& path);
// --profile-output: a FILE.json is used as is; anything else is a directory (created) that gets
// pypto-trace-<pid>-<n>.json. Returns the file path.
std::string trace_output_path(const std::string& output);

}  // namespace pypto::prof
