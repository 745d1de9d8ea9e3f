#include "cli/bench_offline.h"

#include <chrono>
#include <cmath>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/progress.h"

namespace pypto::bench {

using Clock = std::chrono::steady_clock;

std::vector<int32_t> random_prompt_ids(int64_t len, int32_t id_limit, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> d(0, id_limit - 1);
  std::vector<int32_t> ids(static_cast<size_t>(len));
  for (int32_t& x : ids) x = d(rng);
  return ids;
}

namespace {

SamplingParams fixed_length_params(int64_t output_len) {
  SamplingParams p;
  p.max_tokens = int32_t(output_len);
  p.ignore_eos = true;
  p.temperature = 0.0f;
  return p;
}

// Waits for every output of `stream`; returns (first token, last token, tokens) times from t0.
struct StreamTimes {
  double first_s = -1, last_s = 0;
  int64_t tokens = 0;
  std::string error;
};

StreamTimes collect(RequestStream& s, Clock::time_point t0) {
  StreamTimes st;
  while (std::optional<RequestOutput> out = s.next()) {
    const double now = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!out->new_token_ids.empty()) {
      if (st.first_s < 0) st.first_s = now;
      st.last_s = now;
      st.tokens += int64_t(out->new_token_ids.size());
    }
    if (!out->error.empty()) st.error = out->error;
  }
  return st;
}

}  // namespace

LatencyResult run_latency_benchmark(EngineLoop& loop, int32_t id_limit, const LatencyOptions& o) {
  if (o.input_len < 1 || o.output_len < 1) fail("--input-len and --output-len must be at least 1");
  if (o.batch_size < 1) fail("--batch-size ", o.batch_size, ": must be at least 1");
  if (o.num_iters < 1) fail("--num-iters ", o.num_iters, ": must be at least 1");
  LatencyResult r;
  Progress progress("bench latency", size_t(o.num_iters_warmup + o.num_iters));
  uint64_t seed = o.seed;
  for (int it = 0; it < o.num_iters_warmup + o.num_iters; ++it) {
    if (it == o.num_iters_warmup && o.profile_level != prof::Level::Off) {
      prof::reset();
      prof::set_level(o.profile_level);
    }
    // Fresh prompts every iteration so no iteration hits the prefix cache of an earlier one.
    std::vector<std::shared_ptr<RequestStream>> streams;
    const Clock::time_point t0 = Clock::now();
    for (int b = 0; b < o.batch_size; ++b) {
      EngineRequest req;
      req.request_id = "bench-latency-" + std::to_string(it) + "-" + std::to_string(b);
      req.prompt_token_ids = random_prompt_ids(o.input_len, id_limit, seed++);
      req.params = fixed_length_params(o.output_len);
      streams.push_back(loop.add_request(req));
    }
    std::vector<StreamTimes> times(streams.size());
    std::vector<std::thread> waiters;
    for (size_t b = 0; b < streams.size(); ++b) waiters.emplace_back([&, b] { times[b] = collect(*streams[b], t0); });
    for (std::thread& w : waiters) w.join();
    LatencyIteration li;
    double tpot_sum = 0;
    int tpot_n = 0;
    for (const StreamTimes& st : times) {
      if (!st.error.empty()) fail("bench latency: a request failed: ", st.error);
      li.prefill_s = std::max(li.prefill_s, st.first_s);
      li.e2e_s = std::max(li.e2e_s, st.last_s);
      li.output_tokens += st.tokens;
      if (st.tokens > 1) tpot_sum += (st.last_s - st.first_s) / double(st.tokens - 1), tpot_n++;
    }
    li.tpot_s = tpot_n ? tpot_sum / tpot_n : 0;
    if (it >= o.num_iters_warmup) r.iterations.push_back(li);
    if (o.progress) progress.advance(1);
  }
  if (o.profile_level != prof::Level::Off) prof::set_level(prof::Level::Off);
  progress.finish();
  std::vector<double> pre, tpot, e2e;
  for (const LatencyIteration& li : r.iterations) {
    pre.push_back(li.prefill_s * 1e3);
    e2e.push_back(li.e2e_s * 1e3);
    if (o.output_len > 1) tpot.push_back(li.tpot_s * 1e3);
  }
  r.prefill_ms = summarize(pre);
  r.tpot_ms = summarize(tpot);
  r.e2e_ms = summarize(e2e);
  if (r.prefill_ms.mean > 0) r.prefill_tokens_per_s = double(o.batch_size * o.input_len) / (r.prefill_ms.mean / 1e3);
  if (r.tpot_ms.mean > 0) r.decode_tokens_per_s = double(o.batch_size) / (r.tpot_ms.mean / 1e3);
  return r;
}

ThroughputResult run_throughput_benchmark(EngineLoop& loop, int32_t id_limit, const ThroughputOptions& o) {
  if (o.num_prompts < 1) fail("--num-prompts ", o.num_prompts, ": must be at least 1");
  if (o.input_len < 1 || o.output_len < 1) fail("--input-len and --output-len must be at least 1");
  if (o.range_ratio < 0 || o.range_ratio >= 1) fail("--random-range-ratio ", o.range_ratio, ": must be in [0, 1)");
  std::mt19937_64 rng(o.seed);
  auto draw = [&](int64_t len) {
    if (o.range_ratio <= 0) return len;
    const int64_t lo = std::max<int64_t>(1, int64_t(std::floor(double(len) * (1 - o.range_ratio))));
    const int64_t hi = std::max<int64_t>(lo, int64_t(std::ceil(double(len) * (1 + o.range_ratio))));
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  std::vector<EngineRequest> reqs;
  ThroughputResult r;
  for (int64_t i = 0; i < o.num_prompts; ++i) {
    EngineRequest req;
    req.request_id = "bench-throughput-" + std::to_string(i);
    req.prompt_token_ids = random_prompt_ids(draw(o.input_len), id_limit, o.seed * 1000003 + uint64_t(i));
    req.params = fixed_length_params(draw(o.output_len));
    r.input_tokens += int64_t(req.prompt_token_ids.size());
    reqs.push_back(std::move(req));
  }
  Progress progress("bench throughput", size_t(o.num_prompts));
  const Clock::time_point t0 = Clock::now();
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const EngineRequest& req : reqs) streams.push_back(loop.add_request(req));
  for (auto& s : streams) {
    StreamTimes st = collect(*s, t0);
    if (!st.error.empty()) fail("bench throughput: a request failed: ", st.error);
    r.output_tokens += st.tokens;
    r.e2e_ms.push_back(st.last_s * 1e3);
    r.ttft_ms.push_back(st.first_s * 1e3);
    if (o.progress) progress.advance(1);
  }
  r.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  progress.finish();
  r.requests = o.num_prompts;
  r.requests_per_s = double(r.requests) / r.elapsed_s;
  r.output_tokens_per_s = double(r.output_tokens) / r.elapsed_s;
  r.total_tokens_per_s = double(r.input_tokens + r.output_tokens) / r.elapsed_s;
  return r;
}

nlohmann::ordered_json latency_json(const LatencyResult& r) {
  nlohmann::ordered_json its = nlohmann::ordered_json::array();
  for (const LatencyIteration& li : r.iterations)
    its.push_back({{"prefill_ms", li.prefill_s * 1e3}, {"tpot_ms", li.tpot_s * 1e3}, {"e2e_ms", li.e2e_s * 1e3},
                   {"output_tokens", li.output_tokens}});
  return {{"prefill_ms", summary_json(r.prefill_ms)},
          {"tpot_ms", summary_json(r.tpot_ms)},
          {"e2e_ms", summary_json(r.e2e_ms)},
          {"prefill_tokens_per_s", r.prefill_tokens_per_s},
          {"decode_tokens_per_s", r.decode_tokens_per_s},
          {"iterations", its}};
}

nlohmann::ordered_json throughput_json(const ThroughputResult& r) {
  return {{"requests", r.requests},
          {"input_tokens", r.input_tokens},
          {"output_tokens", r.output_tokens},
          {"elapsed_s", r.elapsed_s},
          {"requests_per_s", r.requests_per_s},
          {"output_tokens_per_s", r.output_tokens_per_s},
          {"total_tokens_per_s", r.total_tokens_per_s},
          {"e2e_ms", summary_json(summarize(r.e2e_ms))},
          {"ttft_ms", summary_json(summarize(r.ttft_ms))}};
}

}  // namespace pypto::bench
