#include "cli/soak_report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "cli/bench_report.h"
#include "cli/bench_stats.h"
#include "core/error.h"

namespace pypto::bench {

using nlohmann::ordered_json;

namespace {

std::string num(double v, int prec = 1) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

std::vector<double> ordinary_latencies_ms(const SoakResult& r, bool ttft) {
  std::vector<double> v;
  for (const SoakRecord& x : r.records)
    if (!x.warmup && x.kind == "request" && x.x.result == ExchangeResult::Answered && !x.bad) {
      if (!ttft) v.push_back(x.x.latency_s * 1e3);
      else if (x.x.ttft_s >= 0) v.push_back(x.x.ttft_s * 1e3);
    }
  return v;
}

// Turns per kind and outcome.
std::map<std::string, std::map<std::string, size_t>> outcome_table(const SoakResult& r) {
  std::map<std::string, std::map<std::string, size_t>> t;
  for (const SoakRecord& x : r.records) t[x.kind][x.bad ? "bad" : exchange_result_name(x.x.result)]++;
  return t;
}

}  // namespace

void print_soak_summary(const SoakResult& r) {
  const std::vector<double> lat = ordinary_latencies_ms(r, false);
  std::printf("================ Soak Result ================\n");
  std::printf("%-34s %10.1f\n", "Run duration (s):", r.duration_s);
  std::printf("%-34s %10zu\n", "Client turns (incl. warm-up):", r.records.size());
  std::printf("%-34s %10zu\n", "Answered requests:", r.answered);
  std::printf("%-34s %10zu\n", "Mismatches with solo runs:", r.mismatches);
  std::printf("%-34s %10zu\n", "Server errors (5xx):", r.server_errors);
  std::printf("%-34s %10zu\n", "Dropped / cut answers:", r.dropped);
  std::printf("%-34s %10zu\n", "Refused, queue full (503):", r.refused);
  std::printf("%-34s %7zu/%zu\n", "Abusive bodies refused (4xx):", r.abusive_refused_ok, r.abusive);
  std::printf("%-34s %10zu\n", "Idle connections:", r.idle);
  std::printf("%-34s %10zu\n", "Clients gone mid-stream:", r.disconnects);
  std::printf("%-34s %10zu\n", "Slow readers:", r.slow_readers);
  std::printf("%-34s %7zu/%zu\n", "/health failures:", r.health_failures, r.health_checks);
  std::printf("%-34s %10.1f\n", "Latency p50 (ms):", percentile(lat, 50));
  std::printf("%-34s %10.1f\n", "Latency p99 (ms):", percentile(lat, 99));
  auto reading = [](const char* what, const Reading& x) {
    std::printf("%-34s", what);
    if (x.has_process) std::printf(" rss %.0f MiB, fds %lld", double(x.rss_kib) / 1024, (long long)x.fds);
    if (x.has_metrics) std::printf(" kv %.4f", x.kv_usage);
    std::printf("\n");
  };
  reading("Baseline (after warm-up):", r.baseline);
  reading("After the drain:", r.after);
  if (std::isfinite(r.rss_slope_mib_per_min))
    std::printf("%-34s %10.1f\n", "RSS slope, 2nd half (MiB/min):", r.rss_slope_mib_per_min);
  std::printf("%-34s %10s\n", "Verdict:", r.ok() ? "PASS" : "FAIL");
  for (const std::string& f : r.failures) std::printf("  FAIL: %s\n", f.c_str());
  size_t shown = 0;
  for (const SoakRecord& x : r.records)
    if (x.bad && shown++ < 5) std::printf("  e.g. %s %s at %.1f s: %s\n", x.kind.c_str(), x.entry.c_str(), x.start_s, x.why.c_str());
  std::printf("=============================================\n");
  std::fflush(stdout);
}

std::string soak_latency_svg(const SoakResult& r, const std::string& title) {
  std::vector<double> xs;
  Series p50{"E2E p50", {}}, p99{"E2E p99", {}}, t50{"TTFT p50 (streams)", {}}, t99{"TTFT p99 (streams)", {}};
  for (const LatencyWindow& w : r.windows) {
    if (w.count == 0) continue;
    xs.push_back((w.t0 + w.t1) / 2);
    p50.values.push_back(w.p50_ms), p99.values.push_back(w.p99_ms);
    t50.values.push_back(w.ttft_p50_ms), t99.values.push_back(w.ttft_p99_ms);
  }
  return svg_lines(title, "time since the run began (s), window midpoints", "ms", xs, {p50, p99, t50, t99}, false, 8);
}

void save_soak_results(const std::string& dir, const ordered_json& config, const SoakResult& r) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("--out ", dir, ": cannot create (", ec.message(), ")");
  const std::filesystem::path d = dir;
  const std::vector<double> lat = ordinary_latencies_ms(r, false), ttft = ordinary_latencies_ms(r, true);
  ordered_json j{{"benchmark", "soak"}, {"config", config}, {"passed", r.ok()}, {"failures", r.failures}};
  j["totals"] = {{"turns", r.records.size()},         {"answered", r.answered},
                 {"mismatches", r.mismatches},        {"server_errors", r.server_errors},
                 {"dropped", r.dropped},              {"refused_queue_full", r.refused},
                 {"unexpected_refusals", r.unexpected_refusals}, {"abusive", r.abusive},
                 {"abusive_refused", r.abusive_refused_ok}, {"idle", r.idle}, {"disconnects", r.disconnects},
                 {"slow_readers", r.slow_readers},    {"health_checks", r.health_checks},
                 {"health_failures", r.health_failures}, {"server_died", r.server_died},
                 {"duration_s", r.duration_s}};
  j["latency_ms"] = summary_json(summarize(lat));
  j["ttft_ms"] = summary_json(summarize(ttft));
  j["baseline"] = reading_json(r.baseline);
  j["after_drain"] = reading_json(r.after);
  if (std::isfinite(r.rss_slope_mib_per_min)) j["rss_slope_mib_per_min_second_half"] = r.rss_slope_mib_per_min;
  ordered_json outcomes = ordered_json::object();
  for (const auto& [kind, m] : outcome_table(r))
    for (const auto& [o, n] : m) outcomes[kind][o] = n;
  j["outcomes"] = outcomes;
  ordered_json windows = ordered_json::array();
  for (const LatencyWindow& w : r.windows)
    windows.push_back({{"t0_s", w.t0}, {"t1_s", w.t1}, {"count", w.count}, {"p50_ms", w.p50_ms}, {"p99_ms", w.p99_ms},
                       {"ttft_p50_ms", w.ttft_p50_ms}, {"ttft_p99_ms", w.ttft_p99_ms}});
  j["windows"] = windows;
  ordered_json samples = ordered_json::array();
  for (const auto& [t, x] : r.samples) {
    ordered_json e = reading_json(x);
    e["t_s"] = t;
    samples.push_back(e);
  }
  j["samples"] = samples;
  ordered_json bad = ordered_json::array();
  for (const SoakRecord& x : r.records)
    if (x.bad && bad.size() < 200)
      bad.push_back({{"kind", x.kind}, {"entry", x.entry}, {"warmup", x.warmup}, {"start_s", x.start_s}, {"why", x.why}});
  j["bad_turns"] = bad;
  write_text_file((d / "soak.json").string(), j.dump(2) + "\n");

  const std::string svg = soak_latency_svg(r, "Latency per time window");
  write_text_file((d / "soak-latency.svg").string(), svg + "\n");

  std::string body = "<p class='meta'>";
  for (const auto& [k, v] : config.items()) body += html_escape(k) + " = <b>" + html_escape(v.is_string() ? v.get<std::string>() : v.dump()) + "</b> &nbsp; ";
  body += "</p><h2>" + std::string(r.ok() ? "PASS" : "FAIL") + "</h2>";
  std::vector<std::vector<std::string>> rows;
  for (const auto& [k, v] : j["totals"].items()) rows.push_back({k, v.dump()});
  rows.push_back({"latency p50 / p99 ms", num(percentile(lat, 50)) + " / " + num(percentile(lat, 99))});
  rows.push_back({"baseline", reading_json(r.baseline).dump()});
  rows.push_back({"after drain", reading_json(r.after).dump()});
  for (const std::string& f : r.failures) rows.push_back({"FAIL", f});
  body += html_table({"figure", "value"}, rows);
  std::vector<std::vector<std::string>> orow;
  for (const auto& [kind, m] : outcome_table(r)) {
    std::string s;
    for (const auto& [o, n] : m) s += (s.empty() ? "" : ", ") + o + " " + std::to_string(n);
    orow.push_back({kind, s});
  }
  body += "<h2>Outcomes per client kind</h2>" + html_table({"kind", "outcomes"}, orow);
  std::vector<double> ts;
  Series rss{"RSS MiB", {}}, fds{"open fds x10", {}};
  for (const auto& [t, x] : r.samples)
    if (x.has_process) ts.push_back(t), rss.values.push_back(double(x.rss_kib) / 1024), fds.values.push_back(double(x.fds) * 10);
  body += "<h2>Over time</h2><div class='plots'>" + svg +
          (ts.empty() ? std::string() : svg_lines("Server memory and descriptors", "time since the run began (s)", "", ts, {rss, fds}, false, 8)) +
          "</div>";
  write_text_file((d / "soak.html").string(), html_page("pypto-serving soak", body));
}

}  // namespace pypto::bench
