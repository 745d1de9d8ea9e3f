// `pypto-serving bench serve|latency|throughput`: the benchmark tool (docs/measurement.md).
#include <CLI/CLI.hpp>
#include <cmath>
#include <filesystem>
#include <httplib.h>

#include "cli/bench_embeddings.h"
#include "cli/bench_output.h"
#include "cli/soak_command.h"
#include "core/profile_report.h"
#include "engine/spec_cost_report.h"
#include "core/trace_json.h"
#include "cli/commands.h"
#include "cli/run_options.h"
#include "core/error.h"
#include "core/log.h"
#include "core/progress.h"

namespace pypto::cli {
namespace {

using nlohmann::ordered_json;

std::vector<int> parse_concurrency_list(const std::string& s) {
  std::vector<int> out;
  if (s.empty()) return {0};
  size_t pos = 0;
  while (pos <= s.size()) {
    const size_t comma = s.find(',', pos);
    const std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(item, &used);
    } catch (...) {
      used = 0;
    }
    if (item.empty() || used != item.size() || v < 1) fail("--max-concurrency '", s, "': '", item, "' is not a positive integer");
    out.push_back(v);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

double parse_rate(const std::string& s) {
  if (s == "inf" || s == "Inf" || s == "INF") return INFINITY;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) {
    used = 0;
  }
  if (used != s.size() || !(v > 0)) fail("--request-rate '", s, "': expected a positive number or inf");
  return v;
}

// The server's first model in GET /v1/models: its id and its root (our server and vLLM's report
// the served checkpoint directory there).
struct ServedModel {
  std::string id, root;
  int64_t max_model_len = 0;  // 0: the server did not say
};
ServedModel served_model(const std::string& base) {
  httplib::Client cli(base);
  cli.set_connection_timeout(10, 0);
  auto res = cli.Get("/v1/models");
  if (!res) fail("GET ", base, "/v1/models failed: ", httplib::to_string(res.error()), " (is the server up? give --model NAME)");
  if (res->status != 200) fail("GET ", base, "/v1/models: HTTP ", res->status, " (give --model NAME)");
  auto j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() || !j["data"][0].contains("id"))
    fail("GET ", base, "/v1/models: no model id in the answer (give --model NAME)");
  ServedModel m;
  m.id = j["data"][0]["id"].get<std::string>();
  if (auto r = j["data"][0].find("root"); r != j["data"][0].end() && r->is_string()) m.root = r->get<std::string>();
  if (auto r = j["data"][0].find("max_model_len"); r != j["data"][0].end() && r->is_number_integer())
    m.max_model_len = r->get<int64_t>();
  return m;
}

// Long prompts (--input-len 32000): a server started with a shorter --max-model-len would refuse
// every request, after a dataset that takes a while to build; say so first, naming the flag.
void check_server_context(const ServedModel& m, int64_t input_len, int64_t output_len, double ratio) {
  auto hi = [&](int64_t len) { return ratio > 0 ? int64_t(std::ceil(double(len) * (1 + ratio))) : len; };
  const int64_t need = hi(input_len) + hi(output_len);
  if (m.max_model_len > 0 && need > m.max_model_len)
    fail("bench serve: --input-len ", input_len, " + --output-len ", output_len,
         ratio > 0 ? str_cat(" (x ", 1 + ratio, " with --random-range-ratio)") : std::string(), " need ", need,
         " tokens of context, but the server's max_model_len is ", m.max_model_len, " (", "/v1/models of model '",
         m.id, "'): start the server with --max-model-len ", need, " or more");
}

// bench serve without --tokenizer: the --model directory when it is one, else the server's
// /v1/models root when that is a checkpoint directory readable here (vLLM's benchmark does the
// same); otherwise an error saying what to pass.
std::string default_tokenizer_dir(const std::string& model_flag, const std::string& base) {
  auto has_tokenizer = [](const std::string& d) {
    return !d.empty() && std::filesystem::is_regular_file(std::filesystem::path(d) / "tokenizer.json");
  };
  if (has_tokenizer(model_flag)) return model_flag;
  const ServedModel m = served_model(base);
  if (has_tokenizer(m.root)) {
    log_info("bench serve: no --tokenizer, using the tokenizer of the served checkpoint ", m.root,
             " (the root of ", base, "/v1/models)");
    return m.root;
  }
  fail("bench serve: no --tokenizer, and the server's model '", m.id, "' (/v1/models root '", m.root,
       "') is not a checkpoint directory with tokenizer.json on this machine: give --tokenizer DIR, a local "
       "checkpoint directory of the served model");
}

// Engine flags shared by the in-process benchmarks.
struct EngineFlags {
  std::string model;
  std::string kv_cache_memory = "1GiB";
  int32_t max_num_seqs = 16;
  int64_t max_num_batched_tokens = 4096;
  int64_t max_model_len = 0;
  int threads = 0;
  bool prefix_caching = true;
  int tp = 1;               // tensor-parallel ranks (one replica: the benchmark drives one engine)
  std::string devices;      // --devices (default with --tp N: 0..N-1)
  std::string cpu_groups;   // --cpu-groups
};

void add_engine_flags(CLI::App* app, EngineFlags& f) {
  app->add_option("--model", f.model, "checkpoint directory")->required();
  app->add_option("--kv-cache-memory", f.kv_cache_memory, "KV cache size")->capture_default_str();
  app->add_option("--max-num-seqs", f.max_num_seqs, "running requests at most")->capture_default_str();
  app->add_option("--max-num-batched-tokens", f.max_num_batched_tokens, "token budget of one step")->capture_default_str();
  app->add_option("--max-model-len", f.max_model_len, "tokens per request (default: input + output length)");
  app->add_option("--threads", f.threads, "compute threads (default: all cores)");
  app->add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", f.prefix_caching, "prefix cache")->capture_default_str();
  app->add_option("--tp,--tensor-parallel-size", f.tp, "tensor-parallel ranks (one engine replica)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app->add_option("--devices", f.devices, "device ids of the ranks (default with --tp N: 0,1,..,N-1)");
  app->add_option("--cpu-groups", f.cpu_groups, "CPU: the cores of each device, e.g. 0-7,8-15 (default: equal split)");
}

LoadedEngine load_for_bench(const EngineFlags& f, int64_t needed_len, int32_t max_num_seqs) {
  RunOptions ro;
  ro.kv_cache_memory = f.kv_cache_memory;
  ro.max_num_seqs = std::max(f.max_num_seqs, max_num_seqs);
  ro.max_num_batched_tokens = f.max_num_batched_tokens;
  ro.max_model_len = f.max_model_len > 0 ? f.max_model_len : std::max<int64_t>(needed_len, 16);
  if (ro.max_model_len < needed_len) fail("--max-model-len ", ro.max_model_len, " is below input + output length ", needed_len);
  ro.long_prefill_token_threshold = std::max<int64_t>(ro.long_prefill_token_threshold, 1);
  ro.threads = f.threads;
  ro.enable_prefix_caching = f.prefix_caching;
  // One replica of f.tp ranks (load_replicas; with tp 1 the same engine as load_engine). The
  // benchmarks drive le.loop, which is the whole engine when dp is 1.
  ro.tp = f.tp;
  ro.devices = f.devices;
  if (ro.devices.empty() && f.tp > 1)
    for (int d = 0; d < f.tp; ++d) ro.devices += (d ? "," : "") + std::to_string(d);
  ro.cpu_groups = f.cpu_groups;
  ReplicaLoadOptions lo = replica_load_options(ro, f.model);
  lo.engine.show_progress = Progress::enabled();
  LoadedEngine le = load_replicas(lo);
  log_info("bench: model ", f.model, " (", le.config.num_hidden_layers, " layers) loaded in ", le.load_seconds, " s; backend ",
           le.backend_name, ", tp ", le.tp, ", ", le.threads, " thread(s) per rank");
  if (le.tp > 1) log_info("bench: ", le.placement);
  return le;
}

ordered_json engine_config_json(const EngineFlags& f, const LoadedEngine& le) {
  return {{"model", f.model},           {"layers", le.config.num_hidden_layers}, {"backend", le.backend_name},
          {"threads", le.threads},      {"tp", le.tp},                           {"kv_cache_memory", f.kv_cache_memory},
          {"max_num_seqs", f.max_num_seqs},
          {"load_seconds", le.load_seconds}};
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  CLI::App app{"Benchmarks. serve: an OpenAI-API load generator with vLLM's metric definitions; latency and throughput: "
               "in-process, on a checkpoint directory. Results go to --result-dir as JSON and a self-contained HTML "
               "report."};
  app.require_subcommand(1);
  app.fallthrough();  // --result-dir and --no-save may come after the subcommand
  std::string result_dir = "bench-results";
  bool no_save = false;
  app.add_option("--result-dir", result_dir, "where the JSON and HTML results go")->capture_default_str();
  app.add_flag("--no-save", no_save, "print only; write no files");

  // --- serve ---
  CLI::App* serve = app.add_subcommand("serve", "benchmark a running server (streaming completions, ignore_eos)");
  std::string url = "http://127.0.0.1:8000", endpoint = "/v1/completions", model_name, tokenizer_dir, dataset = "random";
  std::string rate = "inf", concurrency;
  int64_t s_in = 1024, s_out = 128, s_n = 100;
  double s_ratio = 0, burstiness = 1.0;
  uint64_t s_seed = 0;
  bool skip_test = false;
  serve->add_option("--url", url, "server base URL")->capture_default_str();
  serve->add_option("--endpoint", endpoint, "API path (/v1/completions, /v1/chat/completions or /v1/embeddings)")->capture_default_str();
  serve->add_option("--model", model_name, "model name sent in requests (default: the server's first /v1/models id)");
  serve->add_option("--tokenizer", tokenizer_dir, "checkpoint directory whose tokenizer builds the prompts (default: --model when it is a directory, "
                    "else the server's /v1/models root when that directory is readable here)");
  serve->add_option("--dataset,--dataset-name", dataset, "dataset")->check(CLI::IsMember({"random"}))->capture_default_str();
  serve->add_option("--input-len,--random-input-len", s_in, "prompt tokens")->capture_default_str();
  serve->add_option("--output-len,--random-output-len", s_out, "output tokens (ignore_eos)")->capture_default_str();
  serve->add_option("--random-range-ratio", s_ratio, "lengths uniform in len·[1−r, 1+r]")->capture_default_str();
  serve->add_option("--num-prompts", s_n, "requests per run")->capture_default_str();
  serve->add_option("--request-rate", rate, "requests/s (Poisson arrivals), or inf = all at once")->capture_default_str();
  serve->add_option("--burstiness", burstiness, "gamma shape of the arrival gaps (1 = Poisson)")->capture_default_str();
  serve->add_option("--max-concurrency", concurrency, "requests in flight at most; a list (1,4,16,64) sweeps");
  serve->add_option("--seed", s_seed, "seed of the dataset and the arrivals")->capture_default_str();
  serve->add_flag("--skip-test-request", skip_test, "do not send the single test request first");

  // --- latency ---
  CLI::App* latency = app.add_subcommand("latency", "batch prefill time and TPOT in-process (warm-up excluded)");
  EngineFlags lf;
  bench::LatencyOptions lo;
  add_engine_flags(latency, lf);
  latency->add_option("--input-len", lo.input_len, "prompt tokens")->capture_default_str();
  latency->add_option("--output-len", lo.output_len, "output tokens")->capture_default_str();
  latency->add_option("--batch-size", lo.batch_size, "requests per iteration")->capture_default_str();
  latency->add_option("--num-iters", lo.num_iters, "measured iterations")->capture_default_str();
  latency->add_option("--num-iters-warmup", lo.num_iters_warmup, "warm-up iterations (not measured)")->capture_default_str();
  latency->add_option("--seed", lo.seed, "prompt seed")->capture_default_str();
  std::string l_prof = "off", l_prof_out;
  latency->add_option("--profile-level", l_prof,
                      "record the measured iterations at this level (off, or a comma list of e2e, kernel, verbose) "
                      "and print the profile report")
      ->capture_default_str();
  latency->add_option("--profile-output", l_prof_out, "with --profile-level: also write the trace (DIR or FILE.json)");

  // --- throughput ---
  CLI::App* throughput = app.add_subcommand("throughput", "offline throughput in-process (all requests at once)");
  EngineFlags tf;
  bench::ThroughputOptions to;
  add_engine_flags(throughput, tf);
  throughput->add_option("--num-prompts", to.num_prompts, "requests")->capture_default_str();
  throughput->add_option("--input-len", to.input_len, "prompt tokens")->capture_default_str();
  throughput->add_option("--output-len", to.output_len, "output tokens")->capture_default_str();
  throughput->add_option("--random-range-ratio", to.range_ratio, "lengths uniform in len·[1−r, 1+r]")->capture_default_str();
  throughput->add_option("--seed", to.seed, "prompt seed")->capture_default_str();

  // --- soak, fairness (cli/soak_command.cpp) ---
  SoakCommand soak_cmd = add_soak_command(app);
  FairnessCommand fair_cmd = add_fairness_command(app);

  CLI11_PARSE(app, argc, argv);

  if (soak_cmd.app->parsed()) return run_soak_command(soak_cmd);
  if (fair_cmd.app->parsed()) return run_fairness_command(fair_cmd);

  if (serve->parsed()) {
    bench::ServeRunOptions so;
    std::string prefix;
    bench::parse_url(url, so.endpoint.base_url, prefix);
    if (tokenizer_dir.empty()) tokenizer_dir = default_tokenizer_dir(model_name, so.endpoint.base_url);
    so.endpoint.path = prefix + endpoint;
    so.request_rate = parse_rate(rate);
    so.burstiness = burstiness;
    so.seed = s_seed;
    const bool model_from_server = model_name.empty() || std::filesystem::is_directory(model_name);
    ServedModel served;
    if (model_from_server) {
      served = served_model(so.endpoint.base_url);
    } else {
      try {  // a model NAME given: the server need not answer /v1/models; then its limit is not checked here
        served = served_model(so.endpoint.base_url);
      } catch (const Error& e) {
        log_info("bench serve: the prompts' length is not checked against the server's max_model_len: ", e.what());
      }
    }
    so.endpoint.model = model_from_server ? served.id : model_name;
    if (!endpoint.ends_with("/embeddings")) check_server_context(served, s_in, s_out, s_ratio);
    const std::vector<int> cs = parse_concurrency_list(concurrency);
    auto tok = Tokenizer::load(tokenizer_dir);
    bench::RandomDatasetOptions dopt{s_in, s_out, s_ratio, s_n, s_seed};
    const std::vector<bench::DatasetRequest> data = bench::random_dataset(*tok, dopt);
    if (endpoint.ends_with("/embeddings")) return bench::run_embeddings_bench(data, so, cs, skip_test);  // bench_embeddings.h
    if (!skip_test) {
      bench::RequestTiming t = bench::send_completion(so.endpoint, data[0].prompt, int64_t(data[0].prompt_ids.size()),
                                                      std::min<int64_t>(data[0].output_len, 16), std::chrono::steady_clock::now());
      if (!t.success) fail("bench serve: the test request failed: ", t.error);
    }
    std::vector<bench::ServeRun> runs;
    for (int c : cs) {
      so.max_concurrency = c;
      runs.push_back(bench::run_serve_benchmark(data, so));
      bench::print_serve_summary(runs.back());
    }
    ordered_json config{{"url", url},         {"endpoint", so.endpoint.path}, {"model", so.endpoint.model},
                        {"dataset", dataset}, {"input_len", s_in},            {"output_len", s_out},
                        {"range_ratio", s_ratio}, {"num_prompts", s_n},       {"request_rate", rate},
                        {"burstiness", burstiness}, {"max_concurrency", concurrency.empty() ? "none" : concurrency},
                        {"seed", s_seed}};
    if (!no_save) bench::save_serve_results(result_dir, config, runs);
    size_t failed = 0;
    for (const auto& r : runs) failed += r.metrics.failed;
    return failed ? 1 : 0;
  }

  if (latency->parsed()) {
    LoadedEngine le = load_for_bench(lf, lo.input_len + lo.output_len, lo.batch_size);
    lo.progress = Progress::enabled();
    lo.profile_level = prof::parse_level(l_prof);
    if (!l_prof_out.empty() && lo.profile_level == prof::Level::Off) fail("--profile-output needs --profile-level");
    bench::LatencyResult r = bench::run_latency_benchmark(*le.loop, int32_t(le.config.vocab_size), lo);
    bench::print_latency_summary(r);
    if (lo.profile_level != prof::Level::Off) {
      const prof::Trace trace = prof::collect();
      prof::RunInfo info;
      info.load_s = le.load_seconds;
      info.ttft_s = prof::request_ttfts_s(trace);
      if (const EngineLoopStats st = le.loop->stats(); st.speculative)
        info.speculation = format_spec_decode_section(st.spec_decode, st.spec_cost);
      std::fputs(prof::format_report(prof::analyze_trace(trace, lo.profile_level), info).c_str(), stdout);
      if (!l_prof_out.empty()) {
        const std::string path = prof::trace_output_path(l_prof_out);
        prof::write_chrome_trace(trace, path);
        std::printf("trace: %s (%zu events)\n", path.c_str(), trace.events.size());
      }
    }
    ordered_json config = engine_config_json(lf, le);
    config["input_len"] = lo.input_len;
    config["output_len"] = lo.output_len;
    config["batch_size"] = lo.batch_size;
    config["num_iters"] = lo.num_iters;
    config["num_iters_warmup"] = lo.num_iters_warmup;
    config["profile_level"] = l_prof;
    if (!no_save) bench::save_latency_results(result_dir, config, r);
    le.loop->shutdown();
    return 0;
  }

  LoadedEngine le = load_for_bench(tf, int64_t(std::ceil((to.input_len + to.output_len) * (1 + to.range_ratio))) + 1, 0);
  to.progress = Progress::enabled();
  bench::ThroughputResult r = bench::run_throughput_benchmark(*le.loop, int32_t(le.config.vocab_size), to);
  bench::print_throughput_summary(r);
  ordered_json config = engine_config_json(tf, le);
  config["num_prompts"] = to.num_prompts;
  config["input_len"] = to.input_len;
  config["output_len"] = to.output_len;
  config["range_ratio"] = to.range_ratio;
  if (!no_save) bench::save_throughput_results(result_dir, config, r);
  le.loop->shutdown();
  return 0;
}

}  // namespace pypto::cli
