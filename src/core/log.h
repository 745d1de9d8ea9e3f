#pragma once
// Minimal leveled logging to stderr. PYPTO_LOG_LEVEL=debug|info|warn|error (default info).
#include <string>

#include "core/error.h"

namespace pypto {

enum class LogLevel { Debug = 0, Info = 1, Warn = 2, Error = 3 };

LogLevel log_level();
void set_log_level(LogLevel l);
void log_write(LogLevel l, const std::string& msg);

template <typename... Args> void log_debug(const Args&... a) { if (log_level() <= LogLevel::Debug) log_write(LogLevel::Debug, str_cat(a...)); }
template <typename... Args> void log_info(const Args&... a) { if (log_level() <= LogLevel::Info) log_write(LogLevel::Info, str_cat(a...)); }
template <typename... Args> void log_warn(const Args&... a) { if (log_level() <= LogLevel::Warn) log_write(LogLevel::Warn, str_cat(a...)); }
template <typename... Args> void log_error(const Args&... a) { log_write(LogLevel::Error, str_cat(a...)); }

}  // namespace pypto
