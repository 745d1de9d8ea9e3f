#include "cli/soak_probe.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <httplib.h>

namespace pypto::bench {
namespace {

std::vector<pid_t> with_descendants(pid_t pid) {
  std::vector<pid_t> out{pid};
  for (size_t i = 0; i < out.size(); ++i) {
    std::ifstream f("/proc/" + std::to_string(out[i]) + "/task/" + std::to_string(out[i]) + "/children");
    pid_t c;
    while (f >> c) out.push_back(c);
  }
  return out;
}

int64_t rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  return 0;
}

int64_t open_fds(pid_t pid) {
  std::error_code ec;
  int64_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

}  // namespace

double metric_sum(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  double sum = 0;
  bool any = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.compare(0, name.size(), name) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != '{' && next != ' ') continue;  // a longer name with this prefix
    const size_t sp = line.rfind(' ');
    try {
      sum += std::stod(line.substr(sp + 1));
      any = true;
    } catch (const std::exception&) {
    }
  }
  return any ? sum : -1;
}

Reading read_server(const std::string& base_url, pid_t pid) {
  Reading r;
  if (pid > 0) {
    for (pid_t p : with_descendants(pid)) {
      r.rss_kib += rss_kib(p);
      r.fds += open_fds(p);
    }
    r.has_process = r.rss_kib > 0;
  }
  httplib::Client cli(base_url);
  cli.set_connection_timeout(5, 0);
  cli.set_read_timeout(10, 0);
  if (auto res = cli.Get("/metrics"); res && res->status == 200) {
    const std::string& t = res->body;
    r.kv_usage = metric_sum(t, "vllm:kv_cache_usage_perc");
    r.running = int64_t(metric_sum(t, "vllm:num_requests_running"));
    r.waiting = int64_t(metric_sum(t, "vllm:num_requests_waiting"));
    r.active = int64_t(metric_sum(t, "pypto:engine_active_requests"));
    r.has_metrics = r.kv_usage >= 0;
  }
  return r;
}

LeakVerdict judge_leaks(const Reading& b, const Reading& a, const LeakTolerance& t) {
  LeakVerdict v;
  auto fail = [&](std::string s) {
    v.ok = false;
    v.failures.push_back(std::move(s));
  };
  if (b.has_metrics && a.has_metrics && a.kv_usage > b.kv_usage + t.kv + 1e-9)
    fail("kv_cache_usage " + std::to_string(b.kv_usage) + " -> " + std::to_string(a.kv_usage) +
         " after the drain (blocks still held; allowed growth " + std::to_string(t.kv) + ")");
  if (a.has_metrics && (a.running > 0 || a.waiting > 0 || a.active > 0))
    fail("requests left in the engine after the drain: running " + std::to_string(a.running) + ", waiting " +
         std::to_string(a.waiting) + ", active " + std::to_string(a.active));
  if (b.has_process && a.has_process) {
    const int64_t grow_mib = (a.rss_kib - b.rss_kib) / 1024;
    if (grow_mib > t.rss_mib)
      fail("rss " + std::to_string(b.rss_kib / 1024) + " MiB -> " + std::to_string(a.rss_kib / 1024) + " MiB (+" +
           std::to_string(grow_mib) + ", allowed +" + std::to_string(t.rss_mib) + ")");
    if (a.fds - b.fds > t.fds)
      fail("open fds " + std::to_string(b.fds) + " -> " + std::to_string(a.fds) + " (allowed +" + std::to_string(t.fds) + ")");
  }
  return v;
}

nlohmann::ordered_json reading_json(const Reading& r) {
  nlohmann::ordered_json j;
  if (r.has_process) j["rss_mib"] = double(r.rss_kib) / 1024, j["fds"] = r.fds;
  if (r.has_metrics) j["kv_cache_usage"] = r.kv_usage, j["running"] = r.running, j["waiting"] = r.waiting, j["active"] = r.active;
  return j;
}

}  // namespace pypto::bench
