#include "cli/bench_output.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli/bench_report.h"
#include "core/error.h"

namespace pypto::bench {
namespace {

std::string num(double v, int prec = 2) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", prec, v);
  return b;
}

void line(const char* name, double v, int prec = 2) { std::printf("%-40s %12.*f\n", name, prec, v); }

void print_summary_block(const char* metric, const char* unit, const Summary& s) {
  std::printf("%s\n", ("---------------" + std::string(metric) + "----------------").c_str());
  line(("Mean " + std::string(unit) + ":").c_str(), s.mean);
  line(("Median " + std::string(unit) + ":").c_str(), s.median);
  for (const auto& [p, v] : s.percentiles)
    if (p == 99) line(("P99 " + std::string(unit) + ":").c_str(), v);
}

std::filesystem::path prepare_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("--result-dir ", dir, ": cannot create (", ec.message(), ")");
  return dir;
}

std::vector<std::string> summary_row(const std::string& name, const Summary& s) {
  double p99 = 0;
  for (const auto& [p, v] : s.percentiles)
    if (p == 99) p99 = v;
  return {name, std::to_string(s.count), num(s.mean), num(s.median), num(p99), num(s.min), num(s.max)};
}

std::string meta_block(const nlohmann::ordered_json& config) {
  std::string s = "<p class='meta'>";
  for (const auto& [k, v] : config.items()) s += html_escape(k) + " = <b>" + html_escape(v.is_string() ? v.get<std::string>() : v.dump()) + "</b> &nbsp; ";
  return s + "</p>";
}

}  // namespace

void print_serve_summary(const ServeRun& run) {
  const ServeMetrics& m = run.metrics;
  std::printf("============ Serving Benchmark Result ============\n");
  if (run.max_concurrency > 0) line("Maximum request concurrency:", run.max_concurrency, 0);
  line("Successful requests:", double(m.completed), 0);
  line("Failed requests:", double(m.failed), 0);
  line("Benchmark duration (s):", m.duration_s);
  line("Total input tokens:", double(m.total_input), 0);
  line("Total generated tokens:", double(m.total_output), 0);
  line("Request throughput (req/s):", m.request_throughput);
  line("Output token throughput (tok/s):", m.output_throughput);
  line("Total token throughput (tok/s):", m.total_token_throughput);
  print_summary_block("Time to First Token", "TTFT (ms)", m.ttft_ms);
  print_summary_block("Time per Output Token (excl. 1st token)", "TPOT (ms)", m.tpot_ms);
  print_summary_block("Inter-token Latency", "ITL (ms)", m.itl_ms);
  print_summary_block("End-to-end Latency", "E2EL (ms)", m.e2el_ms);
  if (const auto& sd = run.spec_decode; sd && sd->drafts > 0) {
    std::printf("%s\n", "---------------Speculative Decoding---------------");
    line("Drafts:", sd->drafts, 0);
    line("Draft tokens:", sd->draft_tokens, 0);
    line("Accepted tokens:", sd->accepted_tokens, 0);
    line("Acceptance rate (%):", 100.0 * sd->accepted_tokens / std::max(1.0, sd->draft_tokens));
    line("Mean acceptance length:", 1.0 + sd->accepted_tokens / sd->drafts);
    if (const double steps = sd->steps_speculating + sd->steps_plain; steps > 0) {  // the cost model's choice
      line("Decode steps speculating (%):", 100.0 * sd->steps_speculating / steps);
      line("Cost-model probes:", sd->probes, 0);
    }
  }
  std::printf("==================================================\n");
  for (const RequestTiming& r : run.requests)
    if (!r.success) {
      std::printf("first failure: %s\n", r.error.c_str());
      break;
    }
  std::fflush(stdout);
}

void save_serve_results(const std::string& dir, const nlohmann::ordered_json& config, const std::vector<ServeRun>& runs) {
  const std::filesystem::path d = prepare_dir(dir);
  nlohmann::ordered_json j{{"benchmark", "serve"}, {"config", config}, {"runs", nlohmann::ordered_json::array()}};
  for (const ServeRun& run : runs) {
    nlohmann::ordered_json reqs = nlohmann::ordered_json::array();
    for (const RequestTiming& r : run.requests)
      reqs.push_back({{"success", r.success}, {"error", r.error}, {"prompt_len", r.prompt_len},
                      {"output_tokens", r.output_tokens}, {"send_s", r.send_s}, {"ttft_s", r.ttft_s},
                      {"latency_s", r.latency_s}, {"itl_s", r.itl_s}});
    j["runs"].push_back({{"max_concurrency", run.max_concurrency}, {"metrics", metrics_json(run.metrics)}, {"requests", reqs}});
  }
  write_text_file((d / "serve.json").string(), j.dump(2) + "\n");

  std::string body = meta_block(config);
  std::vector<std::vector<std::string>> rows;
  for (const ServeRun& run : runs) {
    const ServeMetrics& m = run.metrics;
    rows.push_back({run.max_concurrency > 0 ? std::to_string(run.max_concurrency) : "∞", std::to_string(m.completed),
                    std::to_string(m.failed), num(m.duration_s), num(m.request_throughput), num(m.output_throughput),
                    num(m.ttft_ms.mean), num(m.ttft_ms.median), num(m.tpot_ms.mean), num(m.tpot_ms.median),
                    num(m.itl_ms.median), num(m.e2el_ms.median)});
  }
  body += "<h2>Summary</h2>" + html_table({"max concurrency", "ok", "failed", "duration s", "req/s", "output tok/s",
                                           "TTFT mean ms", "TTFT p50 ms", "TPOT mean ms", "TPOT p50 ms", "ITL p50 ms",
                                           "E2EL p50 ms"},
                                          rows);
  if (runs.size() > 1) {
    std::vector<double> xs;
    Series tput{"output tok/s", {}}, reqs{"requests/s ×100", {}};
    Series ttft{"TTFT p50", {}}, tpot{"TPOT p50", {}}, e2e{"E2EL p50 / 10", {}};
    for (const ServeRun& run : runs) {
      xs.push_back(run.max_concurrency > 0 ? run.max_concurrency : double(run.requests.size()));
      tput.values.push_back(run.metrics.output_throughput);
      reqs.values.push_back(run.metrics.request_throughput * 100);
      ttft.values.push_back(run.metrics.ttft_ms.median);
      tpot.values.push_back(run.metrics.tpot_ms.median);
      e2e.values.push_back(run.metrics.e2el_ms.median / 10);
    }
    body += "<h2>Against concurrency</h2><div class='plots'>" +
            svg_lines("Throughput vs max concurrency", "max concurrency", "tokens/s", xs, {tput, reqs}, true) +
            svg_lines("Latency vs max concurrency", "max concurrency", "ms", xs, {ttft, tpot, e2e}, true) + "</div>";
    std::vector<Series> ttfts, tpots;
    for (const ServeRun& run : runs) {
      const std::string c = "c=" + std::to_string(run.max_concurrency);
      ttfts.push_back({c, run.metrics.ttfts_ms});
      tpots.push_back({c, run.metrics.tpots_ms});
    }
    body += "<div class='plots'>" + svg_cdf("TTFT CDF by concurrency", "TTFT (ms)", ttfts) +
            svg_cdf("TPOT CDF by concurrency", "TPOT (ms)", tpots) + "</div>";
  }
  for (const ServeRun& run : runs) {
    const ServeMetrics& m = run.metrics;
    body += "<h2>" + std::string(run.max_concurrency > 0 ? "max concurrency " + std::to_string(run.max_concurrency) : "unlimited concurrency") + "</h2>";
    body += html_table({"metric (ms)", "n", "mean", "median", "p99", "min", "max"},
                       {summary_row("TTFT", m.ttft_ms), summary_row("TPOT", m.tpot_ms), summary_row("ITL", m.itl_ms),
                        summary_row("E2EL", m.e2el_ms)});
    body += "<div class='plots'>" + svg_histogram("TTFT distribution", "TTFT (ms)", m.ttfts_ms) +
            svg_histogram("TPOT distribution", "TPOT (ms)", m.tpots_ms) +
            svg_histogram("ITL distribution (all chunks)", "ITL (ms)", m.itls_ms) +
            svg_cdf("E2E latency CDF", "E2EL (ms)", {{"E2EL", m.e2els_ms}}) + "</div>";
  }
  write_text_file((d / "serve.html").string(), html_page("pypto-serving bench serve", body));
  std::printf("results: %s, %s\n", (d / "serve.json").c_str(), (d / "serve.html").c_str());
}

void print_latency_summary(const LatencyResult& r) {
  std::printf("============ Latency Benchmark Result ============\n");
  line("Measured iterations:", double(r.iterations.size()), 0);
  line("Prefill mean (ms):", r.prefill_ms.mean);
  line("Prefill median (ms):", r.prefill_ms.median);
  line("Prefill tokens/s:", r.prefill_tokens_per_s, 1);
  line("TPOT mean (ms):", r.tpot_ms.mean, 3);
  line("TPOT median (ms):", r.tpot_ms.median, 3);
  for (const auto& [p, v] : r.tpot_ms.percentiles)
    if (p == 99) line("TPOT p99 (ms):", v, 3);
  line("Decode tokens/s:", r.decode_tokens_per_s, 1);
  line("E2E latency mean (ms):", r.e2e_ms.mean);
  std::printf("==================================================\n");
  std::fflush(stdout);
}

void save_latency_results(const std::string& dir, const nlohmann::ordered_json& config, const LatencyResult& r) {
  const std::filesystem::path d = prepare_dir(dir);
  write_text_file((d / "latency.json").string(),
                  nlohmann::ordered_json{{"benchmark", "latency"}, {"config", config}, {"result", latency_json(r)}}.dump(2) + "\n");
  std::vector<double> pre, tpot, e2e, xs;
  for (size_t i = 0; i < r.iterations.size(); ++i) {
    xs.push_back(double(i + 1));
    pre.push_back(r.iterations[i].prefill_s * 1e3);
    tpot.push_back(r.iterations[i].tpot_s * 1e3);
    e2e.push_back(r.iterations[i].e2e_s * 1e3);
  }
  std::string body = meta_block(config);
  body += html_table({"metric (ms)", "n", "mean", "median", "p99", "min", "max"},
                     {summary_row("prefill", r.prefill_ms), summary_row("TPOT", r.tpot_ms), summary_row("E2E", r.e2e_ms)});
  body += html_table({"rate", "tokens/s"}, {{"prefill", num(r.prefill_tokens_per_s, 1)}, {"decode", num(r.decode_tokens_per_s, 1)}});
  body += "<div class='plots'>" + svg_histogram("Prefill time", "ms", pre) + svg_histogram("TPOT", "ms", tpot) +
          svg_lines("Per iteration", "iteration", "ms", xs, {{"TPOT", tpot}, {"prefill", pre}}) +
          svg_cdf("E2E latency CDF", "ms", {{"E2E", e2e}}) + "</div>";
  write_text_file((d / "latency.html").string(), html_page("pypto-serving bench latency", body));
  std::printf("results: %s, %s\n", (d / "latency.json").c_str(), (d / "latency.html").c_str());
}

void print_throughput_summary(const ThroughputResult& r) {
  std::printf("=========== Throughput Benchmark Result ==========\n");
  line("Requests:", double(r.requests), 0);
  line("Input tokens:", double(r.input_tokens), 0);
  line("Output tokens:", double(r.output_tokens), 0);
  line("Elapsed (s):", r.elapsed_s, 3);
  line("Requests/s:", r.requests_per_s);
  line("Output tokens/s:", r.output_tokens_per_s, 1);
  line("Total tokens/s:", r.total_tokens_per_s, 1);
  std::printf("==================================================\n");
  std::fflush(stdout);
}

void save_throughput_results(const std::string& dir, const nlohmann::ordered_json& config, const ThroughputResult& r) {
  const std::filesystem::path d = prepare_dir(dir);
  write_text_file((d / "throughput.json").string(),
                  nlohmann::ordered_json{{"benchmark", "throughput"}, {"config", config}, {"result", throughput_json(r)}}.dump(2) + "\n");
  std::string body = meta_block(config);
  body += html_table({"metric", "value"}, {{"requests", std::to_string(r.requests)},
                                           {"elapsed s", num(r.elapsed_s, 3)},
                                           {"requests/s", num(r.requests_per_s)},
                                           {"output tokens/s", num(r.output_tokens_per_s, 1)},
                                           {"total tokens/s", num(r.total_tokens_per_s, 1)}});
  body += "<div class='plots'>" + svg_cdf("Request completion (from the common start)", "ms", {{"first token", r.ttft_ms}, {"finished", r.e2e_ms}}) +
          svg_histogram("E2E latency", "ms", r.e2e_ms) + "</div>";
  write_text_file((d / "throughput.html").string(), html_page("pypto-serving bench throughput", body));
  std::printf("results: %s, %s\n", (d / "throughput.json").c_str(), (d / "throughput.html").c_str());
}

}  // namespace pypto::bench
