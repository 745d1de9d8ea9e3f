#include "core/profile_control.h"

#include <mutex>

#include "core/trace_json.h"

namespace pypto::prof {
namespace {
std::mutex g_mu;
bool g_recording = false;
}  // namespace

bool start_recording(Level level) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (g_recording) return false;
  reset();  // nothing from before the window
  set_level(level == Level::Off ? Level::E2E : level);
  g_recording = true;
  return true;
}

StopResult stop_recording(const std::string& output) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (!g_recording) return {};
  set_level(Level::Off);
  g_recording = false;
  const Trace t = collect();
  StopResult r;
  r.path = trace_output_path(output.empty() ? std::string("pypto-traces") : output);
  r.events = t.events.size();
  write_chrome_trace(t, r.path);
  return r;
}

bool recording() {
  std::lock_guard<std::mutex> lk(g_mu);
  return g_recording;
}

}  // namespace pypto::prof
