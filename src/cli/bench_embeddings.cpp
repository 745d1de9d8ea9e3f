#include "cli/bench_embeddings.h"

#include <httplib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/bench_stats.h"
#include "core/error.h"

namespace pypto::bench {

using Clock = std::chrono::steady_clock;

double send_embedding(const Endpoint& ep, const std::vector<int32_t>& ids, int64_t& tokens, std::string& error) {
  httplib::Client cli(ep.base_url);
  cli.set_read_timeout(3600, 0);
  cli.set_connection_timeout(10, 0);
  nlohmann::json body = {{"input", ids}, {"encoding_format", "base64"}};
  if (!ep.model.empty()) body["model"] = ep.model;
  const Clock::time_point t0 = Clock::now();
  auto res = cli.Post(ep.path, body.dump(), "application/json");
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!res) {
    error = str_cat("no response (", httplib::to_string(res.error()), ")");
    return s;
  }
  if (res->status != 200) {
    error = str_cat("HTTP ", res->status, ": ", res->body.substr(0, 300));
    return s;
  }
  const nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
  if (!j.is_object() || !j.contains("usage") || !j["usage"].contains("prompt_tokens") || !j.contains("data") ||
      j["data"].size() != 1) {
    error = str_cat("unexpected response: ", res->body.substr(0, 300));
    return s;
  }
  tokens = j["usage"]["prompt_tokens"].get<int64_t>();
  return s;
}

EmbeddingsRun run_embeddings_benchmark(const std::vector<DatasetRequest>& data, const ServeRunOptions& o) {
  EmbeddingsRun run;
  run.max_concurrency = o.max_concurrency;
  const std::vector<double> arrivals = arrival_times(data.size(), o.request_rate, o.burstiness, o.seed);
  std::vector<double> latency(data.size(), 0);
  std::vector<int64_t> tokens(data.size(), 0);
  std::vector<std::string> errors(data.size());
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  std::vector<std::thread> threads;
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < data.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i])));
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return o.max_concurrency <= 0 || in_flight < o.max_concurrency; });
      ++in_flight;
    }
    threads.emplace_back([&, i] {
      latency[i] = send_embedding(o.endpoint, data[i].prompt_ids, tokens[i], errors[i]);
      {
        std::lock_guard<std::mutex> lk(mu);
        --in_flight;
      }
      cv.notify_one();
    });
  }
  for (std::thread& t : threads) t.join();
  run.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<double> ok;
  for (size_t i = 0; i < data.size(); ++i) {
    if (!errors[i].empty()) {
      ++run.failed;
      if (run.first_error.empty()) run.first_error = errors[i];
      continue;
    }
    ++run.completed;
    ++run.inputs;
    run.tokens += tokens[i];
    ok.push_back(latency[i]);
  }
  run.inputs_per_s = double(run.inputs) / run.duration_s;
  run.tokens_per_s = double(run.tokens) / run.duration_s;
  if (!ok.empty()) {
    double sum = 0;
    for (double v : ok) sum += v;
    run.latency_mean_s = sum / double(ok.size());
    run.latency_p50_s = percentile(ok, 50);
    run.latency_p99_s = percentile(ok, 99);
  }
  return run;
}

void print_embeddings_summary(const EmbeddingsRun& r) {
  std::printf("============ Embeddings Benchmark Result ============\n");
  std::printf("%-40s %d\n", "Max concurrency:", r.max_concurrency);
  std::printf("%-40s %lld\n", "Successful requests:", static_cast<long long>(r.completed));
  std::printf("%-40s %lld\n", "Failed requests:", static_cast<long long>(r.failed));
  std::printf("%-40s %.2f\n", "Benchmark duration (s):", r.duration_s);
  std::printf("%-40s %lld\n", "Total input tokens:", static_cast<long long>(r.tokens));
  std::printf("%-40s %.2f\n", "Inputs/s:", r.inputs_per_s);
  std::printf("%-40s %.2f\n", "Input tokens/s:", r.tokens_per_s);
  std::printf("%-40s %.2f / %.2f / %.2f\n", "Latency mean / p50 / p99 (ms):", 1e3 * r.latency_mean_s,
              1e3 * r.latency_p50_s, 1e3 * r.latency_p99_s);
  if (!r.first_error.empty()) std::printf("%-40s %s\n", "First error:", r.first_error.c_str());
  std::printf("=====================================================\n");
  std::fflush(stdout);
}

int run_embeddings_bench(const std::vector<DatasetRequest>& data, ServeRunOptions o, const std::vector<int>& concurrency,
                         bool skip_test) {
  if (!skip_test) {
    int64_t tokens = 0;
    std::string error;
    send_embedding(o.endpoint, data.at(0).prompt_ids, tokens, error);
    if (!error.empty()) fail("bench serve: the test request failed: ", error);
  }
  int64_t failed = 0;
  for (int c : concurrency) {
    o.max_concurrency = c;
    const EmbeddingsRun r = run_embeddings_benchmark(data, o);
    print_embeddings_summary(r);
    failed += r.failed;
  }
  return failed ? 1 : 0;
}

}  // namespace pypto::bench
