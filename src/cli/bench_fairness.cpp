#include "cli/bench_fairness.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include <httplib.h>

#include "cli/bench_client.h"
#include "cli/bench_report.h"
#include "core/error.h"
#include "core/log.h"

namespace pypto::bench {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

std::vector<int32_t> random_ids(int64_t n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(1000, std::max<int32_t>(1001, vocab - 1));  // plain BPE ids, no specials
  std::vector<int32_t> v(size_t(std::max<int64_t>(n, 1)));
  for (int32_t& x : v) x = d(rng);
  return v;
}

// One streamed completion; its per-chunk timeline. `stop` (when set) closes it early.
struct StreamTimes {
  bool ok = false;
  std::string error;
  double ttft_s = -1, e2e_s = 0;
  std::vector<double> itl_s;
  int64_t tokens = 0;
};

StreamTimes stream(const std::string& base, const json& body, double timeout_s, const std::atomic<bool>* stop,
                   std::atomic<bool>* first_chunk) {
  StreamTimes t;
  httplib::Client cli(base);
  cli.set_read_timeout(time_t(timeout_s), 0);
  cli.set_connection_timeout(10, 0);
  cli.set_keep_alive(false);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.set_header("Content-Type", "application/json");
  req.body = body.dump();
  SseParser sse;
  int status = 0;
  std::string err_body;
  Clock::time_point t0, last;
  bool done = false;
  req.response_handler = [&](const httplib::Response& r) {
    status = r.status;
    return true;
  };
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    if (stop && *stop) return false;
    if (status != 200) {
      err_body.append(d, n);
      return true;
    }
    for (const std::string& ev : sse.feed(d, n)) {
      const ChunkInfo c = parse_chunk(ev);
      if (c.done) done = true;
      if (c.completion_tokens >= 0) t.tokens = c.completion_tokens;
      if (!c.has_choices) continue;
      const Clock::time_point now = Clock::now();
      if (t.ttft_s < 0) {
        t.ttft_s = std::chrono::duration<double>(now - t0).count();
        if (first_chunk) *first_chunk = true;
      } else {
        t.itl_s.push_back(std::chrono::duration<double>(now - last).count());
      }
      last = now;
    }
    return true;
  };
  t0 = Clock::now();
  try {
    const httplib::Result res = cli.send(req);
    if (!res) t.error = httplib::to_string(res.error());
  } catch (const std::exception& e) {
    t.error = e.what();
  }
  if (status != 200 && t.error.empty()) t.error = "HTTP " + std::to_string(status) + ": " + err_body.substr(0, 200);
  t.e2e_s = std::chrono::duration<double>(last - t0).count();
  t.ok = t.error.empty() && done;
  return t;
}

json ordinary_body(const FairnessOptions& o, int i, uint64_t phase) {
  return {{"model", o.model},
          {"prompt", random_ids(o.ordinary_prompt, o.vocab, o.seed * 7919 + phase * 131 + uint64_t(i))},
          {"max_tokens", o.ordinary_output},
          {"temperature", 0},
          {"ignore_eos", true},
          {"stream", true},
          {"stream_options", {{"include_usage", true}}}};
}

}  // namespace

const std::vector<std::string>& heavy_kinds() {
  static const std::vector<std::string> k = {"n64", "long-prompt", "slow-grammar"};
  return k;
}

json heavy_body(const std::string& kind, const FairnessOptions& o, uint64_t k) {
  json b = {{"model", o.model}, {"temperature", 0}, {"stream", true}};
  const uint64_t seed = o.seed * 104729 + 1000 + k;
  if (kind == "n64") {
    b["prompt"] = random_ids(16, o.vocab, seed);
    b["n"] = 64, b["max_tokens"] = o.heavy_output, b["ignore_eos"] = true;
    b["temperature"] = 1.0, b["seed"] = int64_t(k);  // 64 distinct sequences
  } else if (kind == "long-prompt") {
    b["prompt"] = random_ids(o.max_model_len - 8, o.vocab, seed);
    b["max_tokens"] = 4, b["ignore_eos"] = true;
  } else if (kind == "slow-grammar") {
    // Counted repetitions: every token lands in a grammar state not visited before.
    b["prompt"] = random_ids(16, o.vocab, seed);
    b["n"] = 8, b["max_tokens"] = o.heavy_output;
    b["structured_outputs"] = {{"regex", "([a-z]{1,40}[0-9]{1,40}[A-Z]{1,40} ){1,60}"}};
  } else {
    fail("--heavy '", kind, "': expected n64, long-prompt or slow-grammar");
  }
  return b;
}

std::vector<FairnessPhase> run_fairness(const FairnessOptions& o) {
  if (o.max_model_len <= o.ordinary_prompt + o.ordinary_output)
    fail("bench fairness: max_model_len ", o.max_model_len, " leaves no room for the ordinary requests");
  std::vector<std::string> phases = {"alone"};
  for (const std::string& h : o.heavies) {
    (void)heavy_body(h, o, 0);  // names a bad --heavy before anything runs
    phases.push_back(h);
  }
  // A warm-up round (not measured): the first requests of a fresh server pay one-time costs.
  {
    std::vector<std::thread> ts;
    for (int i = 0; i < o.ordinary; ++i)
      ts.emplace_back([&, i] { (void)stream(o.base_url, ordinary_body(o, i, 999), o.timeout_s, nullptr, nullptr); });
    for (std::thread& t : ts) t.join();
  }
  std::vector<FairnessPhase> out;
  for (size_t p = 0; p < phases.size(); ++p) {
    FairnessPhase ph;
    ph.name = phases[p];
    log_info("fairness: ", ph.name, ": ", o.ordinary, " ordinary streams", ph.name == "alone" ? "" : " beside the heavy client");
    std::atomic<bool> stop{false}, heavy_started{false};
    std::atomic<size_t> heavy_sent{0};
    std::thread heavy;
    if (ph.name != "alone") {
      heavy = std::thread([&] {
        for (uint64_t k = 0; !stop; ++k) {
          ++heavy_sent;
          const StreamTimes h = stream(o.base_url, heavy_body(ph.name, o, k), o.timeout_s, &stop, &heavy_started);
          if (!h.ok && !stop) log_warn("fairness: heavy ", ph.name, " request failed: ", h.error);
          heavy_started = true;
        }
      });
      // The ordinary requests start once the heavy one is being served (its first chunk), or after
      // 3 s (a long prefill shows no chunk until it is done).
      const auto until = Clock::now() + std::chrono::seconds(3);
      while (!heavy_started && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const Clock::time_point t0 = Clock::now();
    std::vector<StreamTimes> res(size_t(o.ordinary));
    std::vector<std::thread> ts;
    for (int i = 0; i < o.ordinary; ++i)
      ts.emplace_back([&, i] { res[size_t(i)] = stream(o.base_url, ordinary_body(o, i, p), o.timeout_s, nullptr, nullptr); });
    for (std::thread& t : ts) t.join();
    ph.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    stop = true;
    if (heavy.joinable()) heavy.join();
    ph.heavy_requests = heavy_sent;
    std::vector<double> ttft, tpot;
    for (const StreamTimes& r : res) {
      if (!r.ok) {
        ++ph.failed;
        log_warn("fairness: an ordinary request failed: ", r.error);
        continue;
      }
      ttft.push_back(r.ttft_s * 1e3);
      for (double g : r.itl_s) ph.itls_ms.push_back(g * 1e3);
      if (r.tokens > 1) tpot.push_back((r.e2e_s - r.ttft_s) * 1e3 / double(r.tokens - 1));
    }
    ph.itl_ms = summarize(ph.itls_ms);
    ph.ttft_ms = summarize(ttft);
    ph.tpot_ms = summarize(tpot);
    out.push_back(std::move(ph));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the aborted heavy request leaves
  }
  return out;
}

namespace {
double p99(const Summary& s) {
  for (const auto& [p, v] : s.percentiles)
    if (p == 99) return v;
  return 0;
}
}  // namespace

void print_fairness_summary(const std::vector<FairnessPhase>& phases) {
  if (phases.empty()) return;
  const FairnessPhase& a = phases[0];
  std::printf("================================ Fairness ================================\n");
  std::printf("%-13s %9s %9s %7s %7s %10s %10s %7s %6s\n", "beside", "ITL p50", "ITL p99", "x p50", "x p99", "TTFT p50",
              "TTFT p99", "heavy", "failed");
  for (const FairnessPhase& ph : phases)
    std::printf("%-13s %9.1f %9.1f %7.2f %7.2f %10.1f %10.1f %7zu %6zu\n", ph.name.c_str(), ph.itl_ms.median, p99(ph.itl_ms),
                a.itl_ms.median > 0 ? ph.itl_ms.median / a.itl_ms.median : 0, p99(a.itl_ms) > 0 ? p99(ph.itl_ms) / p99(a.itl_ms) : 0,
                ph.ttft_ms.median, p99(ph.ttft_ms), ph.heavy_requests, ph.failed);
  std::printf("(ms; x = ratio to the ordinary streams alone; heavy = heavy requests sent during the phase)\n");
  std::printf("==========================================================================\n");
  std::fflush(stdout);
}

void save_fairness_results(const std::string& dir, const nlohmann::ordered_json& config, const std::vector<FairnessPhase>& phases) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("--out ", dir, ": cannot create (", ec.message(), ")");
  nlohmann::ordered_json j{{"benchmark", "fairness"}, {"config", config}, {"phases", nlohmann::ordered_json::array()}};
  const double a50 = phases.empty() ? 0 : phases[0].itl_ms.median, a99 = phases.empty() ? 0 : p99(phases[0].itl_ms);
  std::vector<Series> cdfs;
  std::vector<std::vector<std::string>> rows;
  for (const FairnessPhase& ph : phases) {
    j["phases"].push_back({{"name", ph.name}, {"itl_ms", summary_json(ph.itl_ms)}, {"ttft_ms", summary_json(ph.ttft_ms)},
                           {"tpot_ms", summary_json(ph.tpot_ms)}, {"itl_p50_ratio", a50 > 0 ? ph.itl_ms.median / a50 : 0},
                           {"itl_p99_ratio", a99 > 0 ? p99(ph.itl_ms) / a99 : 0}, {"heavy_requests", ph.heavy_requests},
                           {"failed", ph.failed}, {"seconds", ph.seconds}});
    cdfs.push_back({ph.name, ph.itls_ms});
    char b[5][32];
    std::snprintf(b[0], 32, "%.1f", ph.itl_ms.median), std::snprintf(b[1], 32, "%.1f", p99(ph.itl_ms));
    std::snprintf(b[2], 32, "%.2f", a50 > 0 ? ph.itl_ms.median / a50 : 0), std::snprintf(b[3], 32, "%.2f", a99 > 0 ? p99(ph.itl_ms) / a99 : 0);
    std::snprintf(b[4], 32, "%.1f", ph.ttft_ms.median);
    rows.push_back({ph.name, b[0], b[1], b[2], b[3], b[4], std::to_string(ph.heavy_requests)});
  }
  write_text_file((std::filesystem::path(dir) / "fairness.json").string(), j.dump(2) + "\n");
  const std::string body = html_table({"beside", "ITL p50 ms", "ITL p99 ms", "x p50", "x p99", "TTFT p50 ms", "heavy requests"}, rows) +
                           "<div class='plots'>" + svg_cdf("ITL of the ordinary streams", "ms", cdfs) + "</div>";
  write_text_file((std::filesystem::path(dir) / "fairness.html").string(), html_page("pypto-serving fairness", body));
}

}  // namespace pypto::bench
