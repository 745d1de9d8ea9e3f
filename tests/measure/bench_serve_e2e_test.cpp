// bench serve against our own server (in-process, tiny random-weight model, real tokenizer):
// every request succeeds with exactly --output-len tokens and the random prompts' lengths, the
// client's counts match the server's /metrics counters, and the client's TTFT / E2E enclose the
// server's (the client clock starts before the server's arrival stamp and stops after the
// server's last output), with the gap printed.
#include <gtest/gtest.h>
#include <unistd.h>
#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <regex>

#include "cli/bench_serve.h"
#include "engine/model_runner.h"
#include "serve/engine_client.h"
#include "serve/server.h"
#include "tiny_engine.h"

namespace pypto::bench {
namespace {

// The value of an unlabelled-by-us sample line "name{...} value" (first match), or -1.
double metric(const std::string& text, const std::string& name) {
  std::regex re("(^|\n)" + std::regex_replace(name, std::regex(R"([:])"), ":") + R"((\{[^}]*\})? ([0-9.eE+-]+))");
  std::smatch m;
  if (!std::regex_search(text, m, re)) return -1;
  return std::stod(m[3].str());
}

TEST(BenchServeE2E, ClientAgreesWithServerMetrics) {
  const std::string dir = tiny_model_dir("pypto-measure-serve-tiny");
  LoadedEngine le = load_tiny_engine("pypto-measure-serve-tiny", /*max_num_seqs=*/4);
  const ModelConfig config = le.config;
  auto client = std::make_shared<LoopEngineClient>(std::move(le.loop));
  ServerOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.served_model_name = "tiny";
  Server server(so);
  server.start();
  server.set_context(make_serve_context(dir, client, config, 256, 4));

  auto tok = Tokenizer::load(dir);
  const std::vector<DatasetRequest> data = random_dataset(*tok, {12, 6, 0.0, 8, 3});
  ServeRunOptions o;
  o.endpoint = {"http://127.0.0.1:" + std::to_string(server.port()), "/v1/completions", "tiny"};
  o.max_concurrency = 3;
  o.progress = false;
  const ServeRun run = run_serve_benchmark(data, o);
  for (const RequestTiming& r : run.requests) ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(run.metrics.completed, 8u);
  EXPECT_EQ(run.metrics.total_output, 8 * 6);
  EXPECT_EQ(run.metrics.total_input, 8 * 12);
  EXPECT_EQ(run.metrics.tpots_ms.size(), 8u);

  httplib::Client http("127.0.0.1", server.port());
  http.set_read_timeout(60, 0);  // httplib's 5 s default runs out on a loaded CI machine
  auto res = http.Get("/metrics");
  ASSERT_TRUE(res);
  const std::string& text = res->body;
  EXPECT_EQ(metric(text, "vllm:generation_tokens_total"), 48) << text.substr(0, 2000);
  EXPECT_EQ(metric(text, "vllm:prompt_tokens_total"), 96);
  const double n = metric(text, "vllm:time_to_first_token_seconds_count");
  const double ttft_sum = metric(text, "vllm:time_to_first_token_seconds_sum");
  const double e2e_sum = metric(text, "vllm:e2e_request_latency_seconds_sum");
  ASSERT_EQ(n, 8);
  // The engine-side phase histograms: one observation per request (6 tokens each, so time per
  // output token too); inference = prefill + decode; queue + inference is the part of e2e the
  // engine sees.
  for (const char* name : {"vllm:request_queue_time_seconds_count", "vllm:request_prefill_time_seconds_count",
                           "vllm:request_decode_time_seconds_count", "vllm:request_inference_time_seconds_count",
                           "vllm:request_time_per_output_token_seconds_count"})
    EXPECT_EQ(metric(text, name), 8) << name;
  const double queue_sum = metric(text, "vllm:request_queue_time_seconds_sum");
  const double prefill_sum = metric(text, "vllm:request_prefill_time_seconds_sum");
  const double decode_sum = metric(text, "vllm:request_decode_time_seconds_sum");
  const double inference_sum = metric(text, "vllm:request_inference_time_seconds_sum");
  EXPECT_NEAR(inference_sum, prefill_sum + decode_sum, 1e-9);
  EXPECT_GT(decode_sum, 0);
  EXPECT_LE(queue_sum + inference_sum, e2e_sum);
  EXPECT_NEAR(metric(text, "vllm:request_time_per_output_token_seconds_sum"), decode_sum / 5, 1e-9);
  const double server_ttft = ttft_sum / n * 1e3, server_e2e = e2e_sum / n * 1e3;
  // Client intervals enclose the server's: allow 0.5 ms of clock-reading slack.
  EXPECT_GE(run.metrics.ttft_ms.mean + 0.5, server_ttft);
  EXPECT_GE(run.metrics.e2el_ms.mean + 0.5, server_e2e);
  std::printf("TTFT mean: client %.3f ms, server %.3f ms (%+.1f%%); E2E mean: client %.3f ms, server %.3f ms (%+.1f%%)\n",
              run.metrics.ttft_ms.mean, server_ttft, 100 * (run.metrics.ttft_ms.mean / server_ttft - 1),
              run.metrics.e2el_ms.mean, server_e2e, 100 * (run.metrics.e2el_ms.mean / server_e2e - 1));
  server.stop(0);
}

// POST /start_profile and /stop_profile over HTTP, twice in a row: idempotent, and each stop
// returns a complete trace file with the window's requests; 404 without --profile.
TEST(BenchServeE2E, StartStopProfileTwice) {
  const std::string dir = tiny_model_dir("pypto-measure-serve-tiny");
  LoadedEngine le = load_tiny_engine("pypto-measure-serve-tiny");
  const ModelConfig config = le.config;
  auto client = std::make_shared<LoopEngineClient>(std::move(le.loop));
  const std::string traces = ::testing::TempDir() + "/pypto-serve-traces-" + std::to_string(getpid());
  ServerOptions so;
  so.host = "127.0.0.1";
  so.port = 0;
  so.served_model_name = "tiny";
  so.profile = true;
  so.profile_level = "kernel";
  so.profile_output = traces;
  Server server(so);
  server.start();
  server.set_context(make_serve_context(dir, client, config, 256, 4));
  httplib::Client http("127.0.0.1", server.port());
  http.set_read_timeout(60, 0);  // httplib's 5 s default runs out on a loaded CI machine
  std::vector<std::string> files;
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 2; ++k) {
      auto r = http.Post("/start_profile", "", "application/json");
      ASSERT_TRUE(r) << httplib::to_string(r.error());
      ASSERT_EQ(r->status, 200) << r->body;
      EXPECT_EQ(nlohmann::json::parse(r->body)["started"], k == 0);
    }
    auto g = http.Post("/v1/completions", R"({"model":"tiny","prompt":"hello","max_tokens":3,"ignore_eos":true})",
                       "application/json");
    ASSERT_TRUE(g);
    ASSERT_EQ(g->status, 200) << g->body;
    auto stop = http.Post("/stop_profile", "", "application/json");
    ASSERT_TRUE(stop);
    ASSERT_EQ(stop->status, 200) << stop->body;
    auto j = nlohmann::json::parse(stop->body);
    ASSERT_TRUE(j["trace"].is_string()) << stop->body;
    files.push_back(j["trace"].get<std::string>());
    std::ifstream f(files.back());
    std::stringstream ss;
    ss << f.rdbuf();
    auto trace = nlohmann::json::parse(ss.str());  // complete and valid when stop returned
    size_t steps = 0, layers = 0, request_tracks = 0;
    for (const auto& e : trace["traceEvents"]) {
      if (e["ph"] == "X" && e["name"] == "step") steps++;
      if (e["ph"] == "X" && e["name"] == "layer") layers++;
      if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 2) request_tracks++;
    }
    EXPECT_GE(steps, 3u);  // prefill + 2 decodes
    EXPECT_GE(layers, 3u * size_t(config.num_hidden_layers));
    EXPECT_EQ(request_tracks, 1u);
    auto again = http.Post("/stop_profile", "", "application/json");
    ASSERT_TRUE(again);
    EXPECT_EQ(again->status, 200);
    EXPECT_TRUE(nlohmann::json::parse(again->body)["trace"].is_null());
  }
  EXPECT_NE(files[0], files[1]);
  server.stop(0);

  ServerOptions off = so;
  off.profile = false;
  Server plain(off);
  plain.start();
  httplib::Client http2("127.0.0.1", plain.port());
  http2.set_read_timeout(60, 0);  // httplib's 5 s default runs out on a loaded CI machine
  auto r = http2.Post("/start_profile", "", "application/json");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 404);
  plain.stop(0);
}

}  // namespace
}  // namespace pypto::bench
