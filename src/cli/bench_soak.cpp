#include "cli/bench_soak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include <httplib.h>

#include "cli/bench_stats.h"
#include "core/error.h"
#include "core/log.h"

namespace pypto::bench {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

double secs(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What one client turn does.
struct Turn {
  std::string kind;
  const CatalogueEntry* entry = nullptr;
  std::optional<AbuseKind> abuse;
  ExchangeOptions xo;
};

SoakRecord run_turn(const Turn& t, const SoakOptions& o, Clock::time_point origin) {
  SoakRecord r;
  r.kind = t.kind;
  r.start_s = secs(Clock::now() - origin);
  if (t.abuse) {
    r.x = run_abuse(*t.abuse, o.base_url, o.model, o.abuse);
  } else {
    r.entry = t.entry->name;
    r.x = exchange(o.base_url, t.entry->path, t.entry->body, t.xo);
  }
  r.end_s = secs(Clock::now() - origin);
  return r;
}

// Draws a client turn: an abusive one with probability abuse_fraction (each abusive kind, the
// vanishing client and the slow reader equally likely), else a catalogue entry.
Turn draw_turn(std::mt19937_64& rng, const std::vector<CatalogueEntry>& cat, const std::vector<size_t>& streams,
               const SoakOptions& o) {
  Turn t;
  std::uniform_real_distribution<double> u(0, 1);
  if (u(rng) >= o.abuse_fraction) {
    t.kind = "request";
    t.entry = &cat[rng() % cat.size()];
    return t;
  }
  const std::vector<std::string>& kinds = o.abusive_kinds;
  t.kind = kinds[rng() % kinds.size()];
  if (t.kind == "disconnect") {
    t.entry = &cat[streams[rng() % streams.size()]];
    t.xo.disconnect_after_chunks = 1 + int(rng() % 3);
  } else if (t.kind == "slow-reader") {
    t.entry = &cat[streams[rng() % streams.size()]];
    t.xo.slow_read_pause_s = o.slow_read_pause_s;
  } else {
    t.abuse = abuse_kind_named(t.kind);
    if (!t.abuse) fail("--abuse-kinds: '", t.kind, "' is not a client kind");
  }
  return t;
}

// Polls /health; counts answers that are not 200 within the timeout.
class HealthMonitor {
 public:
  HealthMonitor(const SoakOptions& o, SoakResult& res, std::mutex& mu) : o_(o), res_(res), mu_(mu) {
    thread_ = std::thread([this] { loop(); });
  }
  ~HealthMonitor() {
    stop_ = true;
    thread_.join();
  }

 private:
  void loop() {
    while (!stop_) {
      httplib::Client cli(o_.base_url);
      cli.set_connection_timeout(time_t(o_.health_timeout_s), 0);
      cli.set_read_timeout(time_t(o_.health_timeout_s), 0);
      const auto res = cli.Get("/health");
      {
        std::lock_guard<std::mutex> lk(mu_);
        ++res_.health_checks;
        if (!res || res->status != 200) {
          ++res_.health_failures;
          if (res_.first_health_failure.empty())
            res_.first_health_failure = res ? "HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 120)
                                            : "no answer: " + httplib::to_string(res.error());
        }
      }
      for (int i = 0; i < int(o_.health_interval_s * 20) && !stop_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  const SoakOptions& o_;
  SoakResult& res_;
  std::mutex& mu_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

void tally(SoakResult& res, const SoakRecord& r) {
  const bool abusive_body = r.kind != "request" && r.kind != "slow-reader" && r.kind != "disconnect" && r.kind != "idle";
  if (r.kind == "disconnect") ++res.disconnects;
  if (r.kind == "slow-reader") ++res.slow_readers;
  if (abusive_body) ++res.abusive;
  if (r.kind == "idle") ++res.idle;
  if (abusive_body && r.x.result == ExchangeResult::Rejected) ++res.abusive_refused_ok;
  switch (r.x.result) {
    case ExchangeResult::Answered:
      if (r.kind == "request" || r.kind == "slow-reader" || r.kind == "disconnect") ++res.answered;
      break;
    case ExchangeResult::Rejected:
      if (!abusive_body) ++(r.bad ? res.unexpected_refusals : res.refused);
      break;
    case ExchangeResult::ServerError: ++res.server_errors; break;
    case ExchangeResult::Dropped: ++res.dropped; break;
    case ExchangeResult::Disconnected: break;
  }
  if (r.why.rfind("mismatch", 0) == 0) ++res.mismatches;
}

// Waits until the engines hold no request (the drain), then for the descriptors to settle
// (keep-alive connections the server closes after its idle timeout).
Reading drained_reading(const SoakOptions& o, const Reading& baseline) {
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.drain_timeout_s));
  Reading r = read_server(o.base_url, o.server_pid);
  while (Clock::now() < end && (!r.has_metrics || r.running || r.waiting || r.active || r.kv_usage > baseline.kv_usage + 1e-9)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    r = read_server(o.base_url, o.server_pid);
  }
  const Clock::time_point fd_end = std::min<Clock::time_point>(end, Clock::now() + std::chrono::seconds(15));
  while (Clock::now() < fd_end && r.has_process && r.fds > baseline.fds + o.tolerance.fds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    r = read_server(o.base_url, o.server_pid);
  }
  return r;
}

}  // namespace

void judge_record(SoakRecord& r, const json& expected) {
  const bool abusive_body = r.kind != "request" && r.kind != "slow-reader" && r.kind != "disconnect" && r.kind != "idle";
  switch (r.x.result) {
    case ExchangeResult::Answered:
      if (abusive_body) {
        r.bad = true, r.why = "accepted an abusive body";
      } else if (!r.entry.empty()) {
        auto it = expected.find(r.entry);
        if (it == expected.end()) {
          r.bad = true, r.why = "no solo answer for entry " + r.entry;
        } else if (std::string d = first_difference(*it, r.x.canonical); !d.empty()) {
          r.bad = true, r.why = "mismatch with the solo answer of " + r.entry + ": " + d;
        }
      }
      break;
    case ExchangeResult::Rejected:
      // A valid catalogue request may only be refused for a full queue (503 + Retry-After).
      if (!abusive_body && r.x.status != 503) r.bad = true, r.why = "refused a valid request: " + r.x.error;
      break;
    case ExchangeResult::ServerError: r.bad = true, r.why = "server error: " + r.x.error; break;
    case ExchangeResult::Dropped: r.bad = true, r.why = "dropped: " + r.x.error; break;
    case ExchangeResult::Disconnected:
      if (r.kind != "disconnect") r.bad = true, r.why = "closed by the client unexpectedly";
      break;
  }
}

std::vector<LatencyWindow> latency_windows(const std::vector<SoakRecord>& records, double duration_s, double window_s) {
  std::vector<LatencyWindow> w;
  if (!(window_s > 0) || !(duration_s > 0)) return w;
  const size_t n = size_t(std::ceil(duration_s / window_s));
  std::vector<std::vector<double>> lat(n), ttft(n);
  for (const SoakRecord& r : records) {
    if (r.kind != "request" || r.x.result != ExchangeResult::Answered || r.bad || r.warmup) continue;
    const size_t i = std::min(n - 1, size_t(r.end_s / window_s));
    lat[i].push_back(r.x.latency_s * 1e3);
    if (r.x.ttft_s >= 0) ttft[i].push_back(r.x.ttft_s * 1e3);
  }
  for (size_t i = 0; i < n; ++i) {
    LatencyWindow x;
    x.t0 = double(i) * window_s;
    x.t1 = std::min(duration_s, double(i + 1) * window_s);
    x.count = lat[i].size();
    x.p50_ms = percentile(lat[i], 50), x.p99_ms = percentile(lat[i], 99);
    x.ttft_p50_ms = percentile(ttft[i], 50), x.ttft_p99_ms = percentile(ttft[i], 99);
    w.push_back(x);
  }
  return w;
}

double rss_slope_mib_per_min(const std::vector<std::pair<double, Reading>>& samples, double from_s) {
  double n = 0, st = 0, sr = 0, stt = 0, str = 0;
  for (const auto& [t, x] : samples) {
    if (t < from_s || !x.has_process) continue;
    const double r = double(x.rss_kib) / 1024;
    n += 1, st += t, sr += r, stt += t * t, str += t * r;
  }
  const double den = n * stt - st * st;
  if (n < 3 || den <= 0) return NAN;
  return (n * str - st * sr) / den * 60;
}

std::vector<std::string> all_abusive_turn_kinds() {
  std::vector<std::string> k;
  for (AbuseKind a : all_abuse_kinds()) k.push_back(abuse_kind_name(a));
  k.push_back("disconnect");
  k.push_back("slow-reader");
  return k;
}

SoakResult run_soak(const SoakOptions& options, const ServerAlive& alive) {
  SoakOptions o = options;
  if (o.abusive_kinds.empty()) o.abusive_kinds = all_abusive_turn_kinds();
  for (const std::string& k : o.abusive_kinds) {
    const std::vector<std::string> all = all_abusive_turn_kinds();
    if (std::find(all.begin(), all.end(), k) == all.end()) {
      std::string names;
      for (const std::string& n : all) names += (names.empty() ? "" : ", ") + n;
      fail("--abuse-kinds: '", k, "' is not one of ", names);
    }
  }
  if (o.concurrency < 1) fail("--concurrency ", o.concurrency, ": must be at least 1");
  if (!(o.duration_s > 0)) fail("--duration ", o.duration_s, ": must be positive seconds");
  if (o.abuse_fraction < 0 || o.abuse_fraction > 1) fail("--abuse-fraction ", o.abuse_fraction, ": must be in [0, 1]");
  SoakResult res;
  std::mutex mu;
  const std::vector<CatalogueEntry> cat = make_catalogue(o.model);
  std::vector<size_t> streams;
  for (size_t i = 0; i < cat.size(); ++i)
    if (cat[i].stream) streams.push_back(i);

  // 1. Solo answers, one request at a time: the oracle.
  log_info("soak: solo pass over ", cat.size(), " catalogue entries (the expected answers)");
  json expected = json::object();
  for (const CatalogueEntry& e : cat) {
    const Exchange x = exchange(o.base_url, e.path, e.body, {});
    if (x.result != ExchangeResult::Answered)
      fail("soak: the solo run of '", e.name, "' got no answer (", exchange_result_name(x.result), "): ", x.error);
    expected[e.name] = x.canonical;
  }

  // 2. Warm-up, judged like the run: every entry twice, and every abusive body kind once per
  // client, all at full concurrency, so that the allocator's high-water mark (several oversized
  // bodies at once) and the server's caches are reached before the baseline is read.
  std::vector<Turn> warm;
  for (int k = 0; k < 2; ++k)
    for (const CatalogueEntry& e : cat) {
      Turn t;
      t.kind = "request";
      t.entry = &e;
      warm.push_back(t);
    }
  for (const std::string& name : o.abusive_kinds) {
    const std::optional<AbuseKind> a = abuse_kind_named(name);
    if (!a || *a == AbuseKind::Idle) continue;
    for (int w = 0; w < o.concurrency; ++w) {
      Turn t;
      t.kind = name;
      t.abuse = *a;
      warm.push_back(t);
    }
  }
  std::shuffle(warm.begin(), warm.end(), std::mt19937_64(o.seed));
  log_info("soak: warm-up, ", warm.size(), " turns at concurrency ", o.concurrency);
  const Clock::time_point warm_origin = Clock::now();
  {
    std::atomic<size_t> next{0};
    std::vector<std::thread> ts;
    for (int w = 0; w < o.concurrency; ++w)
      ts.emplace_back([&] {
        for (size_t i; (i = next++) < warm.size();) {
          SoakRecord r = run_turn(warm[i], o, warm_origin);
          r.warmup = true;
          judge_record(r, expected);
          std::lock_guard<std::mutex> lk(mu);
          tally(res, r);
          res.records.push_back(std::move(r));
        }
      });
    for (std::thread& t : ts) t.join();
  }
  res.baseline = drained_reading(o, read_server(o.base_url, o.server_pid));
  log_info("soak: baseline ", reading_json(res.baseline).dump());

  // 3. The timed run.
  const double window = o.window_s > 0 ? o.window_s : std::clamp(o.duration_s / 20, 1.0, 60.0);
  const Clock::time_point origin = Clock::now();
  const Clock::time_point deadline = origin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s));
  std::atomic<bool> server_gone{false};
  {
    HealthMonitor health(o, res, mu);
    std::vector<std::thread> ts;
    for (int w = 0; w < o.concurrency; ++w)
      ts.emplace_back([&, w] {
        std::mt19937_64 rng(o.seed * 1000003 + uint64_t(w));
        while (Clock::now() < deadline && !server_gone) {
          SoakRecord r = run_turn(draw_turn(rng, cat, streams, o), o, origin);
          judge_record(r, expected);
          std::lock_guard<std::mutex> lk(mu);
          if (r.bad && res.failures.size() < 20) log_warn("soak: ", r.kind, " ", r.entry, ": ", r.why);
          tally(res, r);
          res.records.push_back(std::move(r));
        }
      });
    const double every = std::clamp(o.duration_s / 12, 5.0, 60.0);
    Clock::time_point next_print = origin + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(every));
    while (Clock::now() < deadline && !server_gone) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!alive()) server_gone = true;
      if (o.progress && Clock::now() >= next_print) {
        next_print += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(every));
        const Reading now_reading = read_server(o.base_url, o.server_pid);
        std::lock_guard<std::mutex> lk(mu);
        res.samples.emplace_back(secs(Clock::now() - origin), now_reading);
        std::vector<double> recent;
        const double now_s = secs(Clock::now() - origin);
        for (const SoakRecord& r : res.records)
          if (r.kind == "request" && r.x.result == ExchangeResult::Answered && r.end_s > now_s - every) recent.push_back(r.x.latency_s * 1e3);
        log_info("soak ", int(now_s), "/", int(o.duration_s), " s: ", res.answered, " answered, ", res.mismatches, " mismatches, ",
                 res.server_errors, " 5xx, ", res.dropped, " dropped, ", res.abusive_refused_ok, "/", res.abusive,
                 " abusive refused, ", res.idle, " idle, ", res.disconnects, " disconnects, ", res.refused, " queue-full; health ",
                 res.health_failures ? "FAILING" : "ok", "; last ", int(every), " s p50 ", int(percentile(recent, 50)), " ms, p99 ",
                 int(percentile(recent, 99)), " ms",
                 now_reading.has_process ? str_cat("; rss ", now_reading.rss_kib / 1024, " MiB, fds ", now_reading.fds) : std::string());
      }
    }
    for (std::thread& t : ts) t.join();  // each turn is bounded by its timeouts
  }
  res.duration_s = secs(Clock::now() - origin);
  if (!alive()) server_gone = true;
  res.rss_slope_mib_per_min = rss_slope_mib_per_min(res.samples, res.duration_s / 2);
  res.windows = latency_windows(res.records, std::max(o.duration_s, res.duration_s), window);

  // 4. The drain and the leak check.
  if (!server_gone) {
    log_info("soak: draining");
    res.after = drained_reading(o, res.baseline);
    log_info("soak: after the drain ", reading_json(res.after).dump());
    res.leaks = judge_leaks(res.baseline, res.after, o.tolerance);
  }
  res.server_died = server_gone;

  auto add = [&](bool bad, std::string s) {
    if (bad) res.failures.push_back(std::move(s));
  };
  add(res.server_died, "the server died during the run");
  add(res.mismatches > 0, std::to_string(res.mismatches) + " answers differ from their solo runs");
  add(res.server_errors > 0, std::to_string(res.server_errors) + " server errors (5xx or an error in a stream)");
  add(res.dropped > 0, std::to_string(res.dropped) + " dropped connections or cut answers");
  add(res.unexpected_refusals > 0, std::to_string(res.unexpected_refusals) + " valid requests refused with a 4xx");
  size_t accepted_abuse = 0;
  for (const SoakRecord& r : res.records)
    if (r.why == "accepted an abusive body") ++accepted_abuse;
  add(accepted_abuse > 0, std::to_string(accepted_abuse) + " abusive bodies answered 200");
  add(res.health_failures > 0, std::to_string(res.health_failures) + " of " + std::to_string(res.health_checks) +
                                   " /health checks failed (first: " + res.first_health_failure + ")");
  add(res.answered == 0, "no request was answered");
  for (const std::string& f : res.leaks.failures) add(true, "leak: " + f);
  return res;
}

}  // namespace pypto::bench
