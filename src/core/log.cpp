#include "core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace pypto {

static LogLevel initial_level() {
  const char* e = std::getenv("PYPTO_LOG_LEVEL");
  if (!e) return LogLevel::Info;
  if (!std::strcmp(e, "debug")) return LogLevel::Debug;
  if (!std::strcmp(e, "warn")) return LogLevel::Warn;
  if (!std::strcmp(e, "error")) return LogLevel::Error;
  return LogLevel::Info;
}

static std::atomic<int> g_level{static_cast<int>(initial_level())};

LogLevel log_level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }
void set_log_level(LogLevel l) { g_level.store(static_cast<int>(l)); }

void log_write(LogLevel l, const std::string& msg) {
  static std::mutex mu;
  static const char* names[] = {"debug", "info", "warn", "error"};
  std::lock_guard<std::mutex> lock(mu);
  std::fprintf(stderr, "[pypto %s] %s\n", names[static_cast<int>(l)], msg.c_str());
}

}  // namespace pypto
