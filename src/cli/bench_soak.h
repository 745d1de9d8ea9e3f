#pragma once
// `bench soak`: mixed and abusive traffic against a server for a chosen time, above its running
// capacity, judged on three things (docs/measurement.md):
//  1. every accepted request answers exactly what a solo run of it answered (catalogue entries
//     are greedy or seeded, the engine batch-invariant: a difference is a mixed-up or corrupted
//     response);
//  2. nothing takes the server down: abusive bodies get a 4xx with an error JSON, never a 5xx or a
//     dropped connection; /health answers 200 throughout; the server process stays alive;
//  3. nothing leaks: KV use, RSS and open descriptors after the drain are back at their
//     post-warm-up baseline (within LeakTolerance).
// Latency p50/p99 per time window shows whether it degrades over the run.
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cli/soak_abuse.h"
#include "cli/soak_catalogue.h"
#include "cli/soak_client.h"
#include "cli/soak_probe.h"

namespace pypto::bench {

struct SoakOptions {
  std::string base_url;     // http://127.0.0.1:PORT
  std::string model;        // served model name
  pid_t server_pid = -1;    // for RSS / fds; <= 0: only /metrics figures
  double duration_s = 60;
  int concurrency = 12;     // clients at once (above the server's --max-num-seqs on purpose)
  uint64_t seed = 0;
  double abuse_fraction = 0.25;  // share of client turns spent on abusive clients
  double window_s = 0;           // latency window; 0: duration / 20, within [1, 60] s
  double slow_read_pause_s = 0.02;
  double health_interval_s = 1;
  double health_timeout_s = 10;
  double drain_timeout_s = 60;
  AbuseOptions abuse;
  // The abusive turns drawn from: abuse kind names, "disconnect", "slow-reader" (empty: all).
  std::vector<std::string> abusive_kinds;
  LeakTolerance tolerance;
  bool progress = true;
};

// One client turn.
struct SoakRecord {
  std::string kind;    // "request", "slow-reader", "disconnect", or an abuse kind's name
  std::string entry;   // the catalogue entry (request kinds)
  bool warmup = false;            // sent in the warm-up, before the baseline
  double start_s = 0, end_s = 0;  // since the timed run (or the warm-up) began
  Exchange x;
  bool bad = false;    // counts against the run
  std::string why;     // when bad: mismatch / server error / dropped / ...
};

struct LatencyWindow {
  double t0 = 0, t1 = 0;
  size_t count = 0;
  double p50_ms = 0, p99_ms = 0, ttft_p50_ms = 0, ttft_p99_ms = 0;
};

struct SoakResult {
  std::vector<SoakRecord> records;  // warm-up and timed run
  size_t answered = 0, mismatches = 0, server_errors = 0, dropped = 0, refused = 0, unexpected_refusals = 0;
  size_t abusive = 0, abusive_refused_ok = 0, idle = 0, disconnects = 0, slow_readers = 0;
  size_t health_checks = 0, health_failures = 0;
  std::string first_health_failure;
  bool server_died = false;
  std::string server_exit;
  Reading baseline, after;
  // Readings during the run (one per progress line): RSS / fds / KV over time.
  std::vector<std::pair<double, Reading>> samples;
  // Least-squares RSS slope over the run's second half (MiB per minute; NaN with < 3 samples):
  // allocator high-water marks flatten out, a leak keeps its slope over a long run.
  double rss_slope_mib_per_min = 0;
  LeakVerdict leaks;
  std::vector<LatencyWindow> windows;
  double duration_s = 0;
  std::vector<std::string> failures;  // the named reasons the run fails (empty: it passed)
  bool ok() const { return failures.empty(); }
};

// Judges one turn's outcome against the expected canonical answers (by entry name); sets bad/why.
// Exposed for the unit test that shows the oracle catches an altered answer.
void judge_record(SoakRecord& r, const nlohmann::json& expected_by_entry);

// Latency windows of `window_s` over the ordinary answered requests (by completion time).
std::vector<LatencyWindow> latency_windows(const std::vector<SoakRecord>& records, double duration_s, double window_s);

// The slope above, from (seconds, Reading) samples taken after `from_s`.
double rss_slope_mib_per_min(const std::vector<std::pair<double, Reading>>& samples, double from_s);

// Every abusive turn kind's name (the abuse kinds, then disconnect and slow-reader).
std::vector<std::string> all_abusive_turn_kinds();

// Called regularly while it runs; false means the server is gone (stop early).
using ServerAlive = std::function<bool()>;

SoakResult run_soak(const SoakOptions& o, const ServerAlive& alive);

}  // namespace pypto::bench
