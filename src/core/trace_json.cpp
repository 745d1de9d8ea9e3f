#include "core/trace_json.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "core/error.h"

namespace pypto::prof {
namespace {

void append_escaped(std::string& out, const std::string& s) {
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      out += b;
    } else {
      out += char(c);
    }
  }
}

const char* arg_name(const Event& e, int i) {
  const std::string_view n = e.name;
  if (e.cat == std::string_view("request")) return i == 0 ? "tokens" : i == 1 ? "start" : nullptr;
  if (n == "step") return i == 0 ? "step" : i == 1 ? "prefill_tokens" : "decode_tokens";
  if (n == "layer" || e.cat == std::string_view("op")) return i == 0 ? "layer" : nullptr;
  return i == 0 ? "arg" : i == 1 ? "arg1" : "arg2";
}

}  // namespace

std::string chrome_trace_json(const Trace& t) {
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  char b[256];
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  // Name only the tracks this trace has events on (the registry keeps every track ever made).
  std::set<int32_t> used, pids;
  for (const Event& e : t.events) used.insert(e.track);
  for (int32_t i : used)
    if (i >= 0 && size_t(i) < t.tracks.size()) pids.insert(t.tracks[size_t(i)].pid);
  for (int32_t pid : pids) {
    sep();
    std::snprintf(b, sizeof b, "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,\"args\":{\"name\":\"%s\"}}", pid,
                  pid == 1 ? "engine" : pid == 2 ? "requests" : "other");
    out += b;
    sep();
    std::snprintf(b, sizeof b, "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,\"args\":{\"sort_index\":%d}}", pid, pid);
    out += b;
  }
  for (int32_t i : used) {
    if (i < 0 || size_t(i) >= t.tracks.size()) continue;
    const Track& tr = t.tracks[size_t(i)];
    sep();
    std::snprintf(b, sizeof b, "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"", tr.pid, tr.tid);
    out += b;
    append_escaped(out, tr.name);
    out += "\"}}";
    sep();
    std::snprintf(b, sizeof b, "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                  tr.pid, tr.tid, tr.tid);
    out += b;
  }
  for (const Event& e : t.events) {
    if (e.track < 0 || size_t(e.track) >= t.tracks.size()) continue;
    const Track& tr = t.tracks[size_t(e.track)];
    sep();
    out += "{\"ph\":\"X\",\"name\":\"";
    append_escaped(out, e.name);
    out += "\",\"cat\":\"";
    append_escaped(out, e.cat);
    std::snprintf(b, sizeof b, "\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,\"args\":{", double(e.ts_ns) / 1e3,
                  double(e.dur_ns) / 1e3, tr.pid, tr.tid);
    out += b;
    bool any = false;
    for (int i = 0; i < 3; ++i) {
      const char* n = arg_name(e, i);
      if (!n || e.args[i] < 0) continue;
      std::snprintf(b, sizeof b, "%s\"%s\":%lld", any ? "," : "", n, static_cast<long long>(e.args[i]));
      out += b;
      any = true;
    }
    out += "}}";
  }
  out += "\n]}\n";
  return out;
}

void write_chrome_trace(const Trace& t, const std::string& path) {
  std::ofstream f(path, std::ios::binary);
  f << chrome_trace_json(t);
  f.close();
  if (!f) fail(path, ": cannot write the trace file");
}

std::string trace_output_path(const std::string& output) {
  namespace fs = std::filesystem;
  if (output.size() > 5 && output.compare(output.size() - 5, 5, ".json") == 0) {
    const fs::path p(output);
    if (p.has_parent_path()) {
      std::error_code ec;
      fs::create_directories(p.parent_path(), ec);
      if (ec) fail("--profile-output ", output, ": cannot create ", p.parent_path().string(), " (", ec.message(), ")");
    }
    return output;
  }
  std::error_code ec;
  fs::create_directories(output, ec);
  if (ec) fail("--profile-output ", output, ": cannot create the directory (", ec.message(), ")");
  static std::atomic<int> n{0};
  return (fs::path(output) / ("pypto-trace-" + std::to_string(getpid()) + "-" + std::to_string(n++) + ".json")).string();
}

}  // namespace pypto::prof
