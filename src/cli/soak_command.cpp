#include "cli/soak_command.h"

#include <filesystem>
#include <memory>
#include <sstream>

#include <httplib.h>

#include "cli/bench_client.h"
#include "cli/soak_report.h"
#include "cli/soak_server.h"
#include "core/error.h"
#include "core/log.h"

namespace pypto::cli {
namespace {

using nlohmann::ordered_json;

void add_server_flags(CLI::App* app, ServerFlags& f, const std::string& default_args, const std::string& default_out) {
  f.server_args = default_args;
  f.out = default_out;
  app->add_option("--url", f.url, "an already running server (http://127.0.0.1:PORT); without it the tool starts one from --model");
  app->add_option("--model", f.model, "without --url: the checkpoint directory to serve; with --url: the model name to send "
                                      "(default: the server's first /v1/models id)");
  app->add_option("--server-args", f.server_args, "without --url: the server's flags, e.g. '--dp 2' or '--tp 2 --max-num-seqs 4'")
      ->capture_default_str();
  app->add_option("--server-pid", f.server_pid, "with --url: the server's pid, for the RSS and descriptor figures (/proc)");
  app->add_option("--server-ready-timeout", f.ready_timeout_s, "seconds to wait for a started server's /health")->capture_default_str();
  app->add_option("--out", f.out, "directory of the JSON report and the plots")->capture_default_str();
}

// The server to talk to: the one at --url, or one started here (kept alive by `owned`).
struct Target {
  std::string base_url, model;
  pid_t pid = -1;
  int64_t max_model_len = 0;
  std::unique_ptr<bench::ServerProcess> owned;
};

Target connect(const ServerFlags& f, const std::string& what) {
  Target t;
  if (f.url.empty()) {
    if (f.model.empty()) fail("bench ", what, ": give --url of a running server, or --model DIR to start one");
    if (!std::filesystem::is_directory(f.model)) fail("--model '", f.model, "': not a checkpoint directory (without --url the tool serves it)");
    std::filesystem::create_directories(f.out);
    t.owned = std::make_unique<bench::ServerProcess>(f.model, f.server_args, (std::filesystem::path(f.out) / "server.log").string(),
                                                     f.ready_timeout_s);
    t.base_url = t.owned->base_url();
    t.pid = t.owned->pid();
  } else {
    std::string prefix;
    bench::parse_url(f.url, t.base_url, prefix);
    if (!prefix.empty()) fail("--url '", f.url, "': give the server's base URL without a path");
    if (t.base_url.find("127.0.0.1") == std::string::npos && t.base_url.find("localhost") == std::string::npos)
      fail("--url '", f.url, "': the soak sends abusive traffic; it only talks to 127.0.0.1 / localhost");
    t.pid = f.server_pid;
  }
  httplib::Client cli(t.base_url);
  cli.set_read_timeout(30, 0);
  auto res = cli.Get("/v1/models");
  if (!res || res->status != 200) fail("bench ", what, ": GET ", t.base_url, "/v1/models failed");
  const auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || j["data"].empty()) fail("bench ", what, ": no model in /v1/models");
  t.model = !f.url.empty() && !f.model.empty() ? f.model : j["data"][0].value("id", "");
  t.max_model_len = j["data"][0].value("max_model_len", int64_t(0));
  return t;
}

}  // namespace

SoakCommand add_soak_command(CLI::App& bench) {
  SoakCommand c;
  c.app = bench.add_subcommand("soak", "mixed and abusive traffic for a while: every answer must equal its solo run, nothing may "
                                       "take the server down, nothing may leak (docs/measurement.md)");
  add_server_flags(c.app, c.server, "--max-num-seqs 4", "soak-results");
  bench::SoakOptions& s = c.soak;
  c.app->add_option("--duration", s.duration_s, "seconds of the timed run (after the solo pass and the warm-up)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  c.app->add_option("--concurrency", s.concurrency, "clients at once (keep it above the server's --max-num-seqs)")
      ->check(CLI::PositiveNumber)->capture_default_str();
  c.app->add_option("--seed", s.seed, "seed of the clients' choices")->capture_default_str();
  c.app->add_option("--abuse-fraction", s.abuse_fraction, "share of client turns that are abusive (bad bodies, idle, gone, slow)")
      ->check(CLI::Range(0.0, 1.0))->capture_default_str();
  c.app->add_option("--abuse-kinds", s.abusive_kinds,
                    "abusive clients to draw from, comma list of malformed, unknown-field, wrong-type, oversized, deep-body, "
                    "deep-schema, idle, disconnect, slow-reader (default: all)")
      ->delimiter(',');
  c.app->add_option("--window", s.window_s, "latency window in seconds (0: duration / 20, within 1..60)")->capture_default_str();
  c.app->add_option("--deep-depth", s.abuse.deep_depth, "nesting depth of the deep-body and deep-schema clients")
      ->check(CLI::Range(1, 1000000))->capture_default_str();
  c.app->add_option("--oversized-bytes", s.abuse.oversized_bytes, "size of the oversized prompt")
      ->check(CLI::Range(1, 1 << 30))->capture_default_str();
  c.app->add_option("--idle-seconds", s.abuse.idle_s, "how long an idle connection holds still")
      ->check(CLI::Range(0.0, 600.0))->capture_default_str();
  c.app->add_option("--rss-tolerance-mib", s.tolerance.rss_mib, "RSS growth allowed from the baseline to after the drain")
      ->check(CLI::NonNegativeNumber)->capture_default_str();
  c.app->add_option("--fd-tolerance", s.tolerance.fds, "open-descriptor growth allowed")->check(CLI::NonNegativeNumber)->capture_default_str();
  c.app->add_option("--health-timeout", s.health_timeout_s, "seconds /health may take before it counts as down")
      ->check(CLI::PositiveNumber)->capture_default_str();
  return c;
}

int run_soak_command(SoakCommand& c) {
  Target t = connect(c.server, "soak");
  bench::SoakOptions o = c.soak;
  o.base_url = t.base_url;
  o.model = t.model;
  o.server_pid = t.pid;
  bench::ServerProcess* owned = t.owned.get();
  const bench::SoakResult r = bench::run_soak(o, [owned] { return !owned || owned->running(); });
  ordered_json config{{"url", c.server.url.empty() ? std::string("(started)") : c.server.url},
                      {"model", c.server.model}, {"server_args", c.server.url.empty() ? c.server.server_args : std::string()},
                      {"duration_s", o.duration_s}, {"concurrency", o.concurrency}, {"seed", o.seed},
                      {"abuse_fraction", o.abuse_fraction}, {"abuse_kinds", o.abusive_kinds}, {"deep_depth", o.abuse.deep_depth},
                      {"oversized_bytes", o.abuse.oversized_bytes}, {"rss_tolerance_mib", o.tolerance.rss_mib},
                      {"fd_tolerance", o.tolerance.fds}};
  bench::SoakResult res = r;
  if (owned) {
    const bool clean = owned->stop();
    if (!clean && !res.server_died) res.failures.push_back("the server did not exit cleanly on SIGTERM (" + owned->exit_status() + ")");
    if (res.server_died) res.server_exit = owned->exit_status(), res.failures.push_back("server: " + res.server_exit + "; log tail:\n" + owned->log_tail(1500));
  }
  bench::print_soak_summary(res);
  bench::save_soak_results(c.server.out, config, res);
  std::printf("soak: report %s/soak.json, plot %s/soak-latency.svg, page %s/soak.html\n", c.server.out.c_str(), c.server.out.c_str(),
              c.server.out.c_str());
  return res.ok() ? 0 : 1;
}

FairnessCommand add_fairness_command(CLI::App& bench) {
  FairnessCommand c;
  c.app = bench.add_subcommand("fairness", "ITL of ordinary streams alone and beside one heavy request (n=64, a huge prompt, a "
                                           "slow grammar), with the ratios");
  add_server_flags(c.app, c.server, "", "fairness-results");
  bench::FairnessOptions& f = c.fair;
  c.app->add_option("--ordinary", f.ordinary, "ordinary streams at once")->check(CLI::PositiveNumber)->capture_default_str();
  c.app->add_option("--input-len", f.ordinary_prompt, "prompt tokens of an ordinary stream")->check(CLI::PositiveNumber)->capture_default_str();
  c.app->add_option("--output-len", f.ordinary_output, "output tokens of an ordinary stream")->check(CLI::PositiveNumber)->capture_default_str();
  c.app->add_option("--heavy-output-len", f.heavy_output, "output tokens of each n64 / slow-grammar sequence")
      ->check(CLI::PositiveNumber)->capture_default_str();
  c.app->add_option("--heavy", c.heavies, "heavy requests to measure beside, a comma list of n64, long-prompt, slow-grammar")
      ->capture_default_str();
  c.app->add_option("--seed", f.seed, "seed of the random prompts")->capture_default_str();
  return c;
}

int run_fairness_command(FairnessCommand& c) {
  bench::FairnessOptions o = c.fair;
  o.heavies.clear();
  std::stringstream ss(c.heavies);
  for (std::string h; std::getline(ss, h, ',');) {
    if (std::find(bench::heavy_kinds().begin(), bench::heavy_kinds().end(), h) == bench::heavy_kinds().end())
      fail("--heavy '", c.heavies, "': '", h, "' is not one of n64, long-prompt, slow-grammar");
    o.heavies.push_back(h);
  }
  Target t = connect(c.server, "fairness");
  o.base_url = t.base_url;
  o.model = t.model;
  o.max_model_len = t.max_model_len;
  if (o.max_model_len <= 0) fail("bench fairness: the server's /v1/models gives no max_model_len");
  const std::vector<bench::FairnessPhase> phases = bench::run_fairness(o);
  bench::print_fairness_summary(phases);
  ordered_json config{{"url", c.server.url.empty() ? std::string("(started)") : c.server.url}, {"model", c.server.model},
                      {"server_args", c.server.server_args}, {"ordinary", o.ordinary}, {"input_len", o.ordinary_prompt},
                      {"output_len", o.ordinary_output}, {"heavy_output_len", o.heavy_output}, {"max_model_len", o.max_model_len},
                      {"heavy", c.heavies}, {"seed", o.seed}};
  bench::save_fairness_results(c.server.out, config, phases);
  std::printf("fairness: report %s/fairness.json, page %s/fairness.html\n", c.server.out.c_str(), c.server.out.c_str());
  size_t failed = 0;
  for (const auto& p : phases) failed += p.failed;
  return failed ? 1 : 0;
}

}  // namespace pypto::cli
