#include "cli/bench_serve.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/progress.h"

namespace pypto::bench {

using Clock = std::chrono::steady_clock;

std::vector<double> arrival_times(size_t n, double rate, double burstiness, uint64_t seed) {
  std::vector<double> t(n, 0.0);
  if (!std::isfinite(rate)) return t;
  if (!(rate > 0)) fail("--request-rate ", rate, ": must be positive (or inf)");
  if (!(burstiness > 0)) fail("--burstiness ", burstiness, ": must be positive");
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  for (size_t i = 1; i < n; ++i) t[i] = t[i - 1] + gap(rng);
  return t;
}

namespace {

// A counting semaphore whose limit 0 means unlimited.
class Slots {
 public:
  explicit Slots(int limit) : limit_(limit) {}
  void acquire() {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return limit_ <= 0 || used_ < limit_; });
    used_++;
  }
  void release() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      used_--;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int limit_, used_ = 0;
};

}  // namespace

ServeRun run_serve_benchmark(const std::vector<DatasetRequest>& data, const ServeRunOptions& o) {
  ServeRun run;
  run.max_concurrency = o.max_concurrency;
  run.requests.resize(data.size());
  const std::vector<double> arrivals = arrival_times(data.size(), o.request_rate, o.burstiness, o.seed);
  std::string label = "bench serve";
  if (o.max_concurrency > 0) label += " c=" + std::to_string(o.max_concurrency);
  Progress progress(label, data.size());
  std::mutex progress_mu;
  Slots slots(o.max_concurrency);
  std::vector<std::thread> threads;
  threads.reserve(data.size());

  const std::optional<SpecDecodeCounters> spec_before = scrape_spec_decode(o.endpoint);
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < data.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrivals[i])));
    slots.acquire();
    threads.emplace_back([&, i] {
      run.requests[i] = send_completion(o.endpoint, data[i].prompt, int64_t(data[i].prompt_ids.size()), data[i].output_len, start);
      slots.release();
      if (o.progress) {
        std::lock_guard<std::mutex> lk(progress_mu);
        progress.advance(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();
  progress.finish();
  run.metrics = compute_serve_metrics(run.requests, duration);
  run.spec_decode = spec_decode_delta(spec_before, scrape_spec_decode(o.endpoint));
  return run;
}

}  // namespace pypto::bench
