#pragma once
// `bench soak`: the leak checker's readings. The server's memory and descriptors from /proc (only
// when the soak knows its pid: it started the server, or --server-pid), its KV use and request
// gauges from /metrics; and the verdict comparing the baseline (after warm-up) with the reading
// after the run has drained.
#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace pypto::bench {

struct Reading {
  bool has_process = false;  // rss/fds were read
  int64_t rss_kib = 0;       // VmRSS of the server and its descendants (--tp ranks), summed
  int64_t fds = 0;           // open descriptors, summed the same way
  bool has_metrics = false;
  double kv_usage = 0;       // vllm:kv_cache_usage_perc, summed over replicas
  int64_t running = 0, waiting = 0, active = 0;  // summed over replicas
};

// pid <= 0: no process figures.
Reading read_server(const std::string& base_url, pid_t pid);
// The value of a Prometheus sample `name` (any labels), summed over its lines; -1 when absent.
double metric_sum(const std::string& text, const std::string& name);

struct LeakTolerance {
  // Growth allowed. glibc keeps the freed pages of transient multi-MiB bodies (several oversized
  // prompts at once) in its per-thread arenas; the server gives them back (serve/heap_return.h:
  // 190 -> 184 MiB over 30 minutes on the tiny model), but a server with a larger pool may hold
  // more between trims. A leak shows as the slope of a long run instead.
  int64_t rss_mib = 256;
  int64_t fds = 8;        // growth allowed (the log file, a keep-alive connection closing late)
  double kv = 0.0;        // KV use must be back where it was: no request holds blocks once idle
};

struct LeakVerdict {
  bool ok = true;
  std::vector<std::string> failures;  // each names the figure, both readings and the tolerance
};
LeakVerdict judge_leaks(const Reading& baseline, const Reading& after, const LeakTolerance& t);

nlohmann::ordered_json reading_json(const Reading& r);

}  // namespace pypto::bench
