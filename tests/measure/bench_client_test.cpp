// The benchmark client against a scripted SSE server: chunk parsing, client-side timing
// (Σ ITL = E2EL − TTFT), usage tokens, errors, the concurrency limit and arrival times.
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "cli/bench_client.h"
#include "cli/bench_serve.h"

namespace pypto::bench {
namespace {

TEST(SseParser, JoinsEventsSplitAcrossReads) {
  SseParser p;
  const std::string a = "data: {\"a\"", b = ":1}\n\ndata: [DONE]\r\n\r\n";
  EXPECT_TRUE(p.feed(a.data(), a.size()).empty());
  auto ev = p.feed(b.data(), b.size());
  ASSERT_EQ(ev.size(), 2u);
  EXPECT_EQ(ev[0], "{\"a\":1}");
  EXPECT_EQ(ev[1], "[DONE]");
}

TEST(ParseChunk, ChoicesUsageAndDone) {
  ChunkInfo c = parse_chunk(R"({"choices":[{"index":0,"text":""}]})");
  EXPECT_TRUE(c.has_choices);  // empty text still counts as a chunk (TTFT definition)
  c = parse_chunk(R"({"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":7}})");
  EXPECT_FALSE(c.has_choices);
  EXPECT_EQ(c.completion_tokens, 7);
  EXPECT_TRUE(parse_chunk("[DONE]").done);
  EXPECT_THROW(parse_chunk("not json"), std::exception);
}

TEST(ParseUrl, SplitsBaseAndPrefix) {
  std::string base, prefix;
  parse_url("http://127.0.0.1:8000/", base, prefix);
  EXPECT_EQ(base, "http://127.0.0.1:8000");
  EXPECT_EQ(prefix, "");
  parse_url("http://h:1/api", base, prefix);
  EXPECT_EQ(prefix, "/api");
  EXPECT_THROW(parse_url("127.0.0.1:8000", base, prefix), std::exception);
}

TEST(CompletionBody, StreamsWithUsageAndIgnoresEos) {
  Endpoint ep{"http://x", "/v1/completions", "m"};
  auto j = nlohmann::json::parse(completion_body(ep, "hi", 5));
  EXPECT_EQ(j["max_tokens"], 5);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_EQ(j["prompt"], "hi");
}

// A server streaming `chunks` choices chunks 5 ms apart, then a usage chunk and [DONE]; it
// counts requests in flight.
struct FakeServer {
  httplib::Server svr;
  std::thread th;
  int port = 0;
  std::atomic<int> in_flight{0}, max_in_flight{0};
  int chunks = 4;
  explicit FakeServer(int n) : chunks(n) {
    svr.Post("/v1/completions", [this](const httplib::Request&, httplib::Response& res) {
      int now = ++in_flight;
      int prev = max_in_flight.load();
      while (now > prev && !max_in_flight.compare_exchange_weak(prev, now)) {}
      res.set_chunked_content_provider("text/event-stream", [this](size_t, httplib::DataSink& sink) {
        for (int i = 0; i < chunks; ++i) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          std::string ev = "data: {\"choices\":[{\"index\":0,\"text\":\"t" + std::to_string(i) + "\"}]}\n\n";
          sink.write(ev.data(), ev.size());
        }
        std::string tail = "data: {\"choices\":[],\"usage\":{\"completion_tokens\":" + std::to_string(chunks) +
                           "}}\n\ndata: [DONE]\n\n";
        sink.write(tail.data(), tail.size());
        --in_flight;
        sink.done();
        return true;
      });
    });
    svr.Post("/v1/bad", [](const httplib::Request&, httplib::Response& res) {
      res.status = 400;
      res.set_content("{\"error\":\"bad prompt\"}", "application/json");
    });
    port = svr.bind_to_any_port("127.0.0.1");
    th = std::thread([this] { svr.listen_after_bind(); });
    while (!svr.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeServer() {
    svr.stop();
    th.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port); }
};

TEST(SendCompletion, TimesChunksOnTheClient) {
  FakeServer fs(6);
  Endpoint ep{fs.url(), "/v1/completions", "m"};
  RequestTiming r = send_completion(ep, "hello", 3, 6, std::chrono::steady_clock::now());
  ASSERT_TRUE(r.success) << r.error;
  EXPECT_EQ(r.output_tokens, 6);
  EXPECT_EQ(r.prompt_len, 3);
  ASSERT_EQ(r.itl_s.size(), 5u);  // one gap per chunk after the first
  double sum = 0;
  for (double g : r.itl_s) sum += g;
  EXPECT_NEAR(sum, r.latency_s - r.ttft_s, 1e-9);
  EXPECT_GE(r.ttft_s, 0.004);
  EXPECT_GT(r.latency_s, r.ttft_s);
}

TEST(SendCompletion, HttpErrorIsAFailureNamingTheStatus) {
  FakeServer fs(1);
  Endpoint ep{fs.url(), "/v1/bad", "m"};
  RequestTiming r = send_completion(ep, "x", 1, 1, std::chrono::steady_clock::now());
  EXPECT_FALSE(r.success);
  EXPECT_NE(r.error.find("HTTP 400"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("bad prompt"), std::string::npos) << r.error;
}

TEST(RunServeBenchmark, RespectsMaxConcurrency) {
  FakeServer fs(3);
  std::vector<DatasetRequest> data(8, DatasetRequest{"p", {1, 2}, 3});
  ServeRunOptions o;
  o.endpoint = {fs.url(), "/v1/completions", "m"};
  o.max_concurrency = 2;
  o.progress = false;
  ServeRun run = run_serve_benchmark(data, o);
  EXPECT_EQ(run.metrics.completed, 8u);
  EXPECT_EQ(run.metrics.failed, 0u);
  EXPECT_EQ(run.metrics.total_output, 24);
  EXPECT_EQ(run.metrics.total_input, 16);
  EXPECT_LE(fs.max_in_flight.load(), 2);
  EXPECT_GE(fs.max_in_flight.load(), 1);
}

TEST(ArrivalTimes, SeededPoissonAndInfinity) {
  auto inf = arrival_times(5, INFINITY, 1.0, 0);
  for (double t : inf) EXPECT_EQ(t, 0.0);
  auto a = arrival_times(20000, 50.0, 1.0, 7), b = arrival_times(20000, 50.0, 1.0, 7), c = arrival_times(20000, 50.0, 1.0, 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(a[0], 0.0);
  for (size_t i = 1; i < a.size(); ++i) ASSERT_GE(a[i], a[i - 1]);
  const double mean_gap = a.back() / double(a.size() - 1);
  EXPECT_NEAR(mean_gap, 1.0 / 50.0, 0.02 / 50.0 * 3);  // ±3 standard errors (1/√n ≈ 0.7%)
  EXPECT_THROW(arrival_times(3, -1.0, 1.0, 0), std::exception);
}

}  // namespace
}  // namespace pypto::bench
