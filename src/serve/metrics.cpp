#include "serve/metrics.h"

#include "serve/spec_decode_metrics.h"

#include <charconv>
#include <chrono>
#include <cstdio>

namespace pypto {

namespace {

std::vector<double> token_buckets(int64_t max_model_len) {
  std::vector<double> b;  // 1, 2, 5, 10, 20, 50, ... up to max_model_len
  for (double base = 1;; base *= 10)
    for (double m : {1.0, 2.0, 5.0}) {
      if (base * m > double(max_model_len)) return b.empty() ? std::vector<double>{1} : b;
      b.push_back(base * m);
    }
}

// The shortest text that reads back as v, as Python's repr (prometheus_client) writes it: bucket
// bounds come out as le="0.3", not le="0.29999999999999999", so queries written against vLLM's
// exposition match ours.
std::string fmt(double v) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, ec == std::errc() ? end : buf);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}

std::string escape_label(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void header(std::string& out, const char* name, const char* type, const char* help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += help;
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& labels) const {
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{" + labels + ",le=\"" + (i < bounds_.size() ? fmt(bounds_[i]) : "+Inf") + "\"} " +
           std::to_string(cum) + "\n";
  }
  out += name + "_sum{" + labels + "} " + fmt(sum_) + "\n";
  out += name + "_count{" + labels + "} " + std::to_string(count_) + "\n";
}

RequestPhaseTimes request_phase_times(const RequestTimes& t, int64_t num_output_tokens) {
  RequestPhaseTimes p;
  if (!t.first_scheduled) return p;  // never scheduled (aborted or failed while waiting)
  auto secs = [](auto from, auto to) { return std::chrono::duration<double>(to - from).count(); };
  p.queue = secs(t.arrival, *t.first_scheduled);
  if (!t.first_token || !t.last_token) return p;  // scheduled, but no token yet
  p.prefill = secs(*t.first_scheduled, *t.first_token);
  p.decode = secs(*t.first_token, *t.last_token);
  p.inference = secs(*t.first_scheduled, *t.last_token);
  // vLLM leaves the prefill's token out; one token has no decode to divide.
  if (num_output_tokens > 1) p.time_per_output_token = *p.decode / double(num_output_tokens - 1);
  return p;
}

namespace {
// vLLM's buckets (vllm/v1/metrics/loggers.py): request_latency_buckets serve e2e and the four
// phase histograms; inter-token latency and per-request time per output token share theirs.
const std::vector<double> kRequestLatencyBuckets = {0.3, 0.5, 0.8, 1,  1.5, 2,   2.5, 5,   10,   15,  20,
                                                    30,  40,  50,  60, 120, 240, 480, 960, 1920, 7680};
const std::vector<double> kTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
                                                  0.75, 1,     2.5,  5,     7.5, 10,   20,  40,  80};
}  // namespace

ServerMetrics::PerEngine::PerEngine(int64_t max_model_len)
    : ttft({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160,
            640, 2560}),
      itl(kTokenLatencyBuckets),
      e2e(kRequestLatencyBuckets),
      prompt_len(token_buckets(max_model_len)),
      generation_len(token_buckets(max_model_len)),
      queue(kRequestLatencyBuckets),
      prefill(kRequestLatencyBuckets),
      decode(kRequestLatencyBuckets),
      inference(kRequestLatencyBuckets),
      tpot(kTokenLatencyBuckets) {}

ServerMetrics::ServerMetrics(size_t num_engines, int64_t max_model_len) {
  for (size_t i = 0; i < num_engines; ++i) engines_.emplace_back(max_model_len);
}

void ServerMetrics::observe_ttft(size_t engine, double seconds) {
  std::lock_guard lock(mu_);
  engines_.at(engine).ttft.observe(seconds);
}

void ServerMetrics::observe_itl(size_t engine, double seconds) {
  std::lock_guard lock(mu_);
  engines_.at(engine).itl.observe(seconds);
}

void ServerMetrics::add_generation_tokens(size_t engine, int64_t n) {
  std::lock_guard lock(mu_);
  engines_.at(engine).generation_tokens += uint64_t(n);
}

void ServerMetrics::request_finished(size_t engine, const std::string& finish_reason, int64_t prompt_tokens,
                                     int64_t generation_tokens, double e2e_seconds, const RequestPhaseTimes& phases) {
  std::lock_guard lock(mu_);
  PerEngine& e = engines_.at(engine);
  ++e.success[finish_reason];
  e.prompt_tokens += uint64_t(prompt_tokens);
  e.e2e.observe(e2e_seconds);
  e.prompt_len.observe(double(prompt_tokens));
  e.generation_len.observe(double(generation_tokens));
  if (phases.queue) e.queue.observe(*phases.queue);
  if (phases.prefill) e.prefill.observe(*phases.prefill);
  if (phases.decode) e.decode.observe(*phases.decode);
  if (phases.inference) e.inference.observe(*phases.inference);
  if (phases.time_per_output_token) e.tpot.observe(*phases.time_per_output_token);
}

void ServerMetrics::request_rejected(const std::string& reason) {
  std::lock_guard lock(mu_);
  ++rejected_[reason];
}

void ServerMetrics::pooling_request(const std::string& endpoint, int64_t inputs) {
  std::lock_guard lock(mu_);
  auto& [requests, n] = pooling_[endpoint];
  ++requests;
  n += uint64_t(inputs);
}

uint64_t ServerMetrics::num_finished(const std::string& finish_reason) const {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const PerEngine& e : engines_) {
    auto it = e.success.find(finish_reason);
    if (it != e.success.end()) n += it->second;
  }
  return n;
}

std::string ServerMetrics::render(const std::string& model_name, const std::vector<EngineGauges>& gauges) const {
  std::lock_guard lock(mu_);
  const std::string model = "model_name=\"" + escape_label(model_name) + "\"";
  auto labels = [&](size_t i) { return model + ",engine=\"" + std::to_string(i) + "\""; };
  std::string out;

  auto gauge = [&](const char* name, const char* help, auto get) {
    header(out, name, "gauge", help);
    for (size_t i = 0; i < gauges.size(); ++i)
      out += std::string(name) + "{" + labels(i) + "} " + std::to_string(get(gauges[i])) + "\n";
  };
  gauge("vllm:num_requests_running", "Number of requests in model execution batches.",
        [](const EngineGauges& g) { return g.num_requests_running; });
  gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.",
        [](const EngineGauges& g) { return g.num_requests_waiting; });
  header(out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  for (size_t i = 0; i < gauges.size(); ++i)
    out += "vllm:kv_cache_usage_perc{" + labels(i) + "} " + fmt(gauges[i].kv_cache_usage) + "\n";
  auto counter = [&](const char* name, const char* help, auto get) {
    header(out, name, "counter", help);
    for (size_t i = 0; i < gauges.size(); ++i)
      out += std::string(name) + "{" + labels(i) + "} " + std::to_string(get(gauges[i])) + "\n";
  };
  counter("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.",
          [](const EngineGauges& g) { return g.num_preemptions; });
  counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.",
          [](const EngineGauges& g) { return g.prefix_cache_queries; });
  counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.",
          [](const EngineGauges& g) { return g.prefix_cache_hits; });
  counter("pypto:state_snapshot_restores_total",
          "Hybrid models: prefix-cache hits that resumed the recurrent state from a snapshot.",
          [](const EngineGauges& g) { return g.state_snapshot_restores; });
  counter("pypto:state_snapshots_saved_total", "Hybrid models: recurrent-state snapshots taken at block boundaries.",
          [](const EngineGauges& g) { return g.state_snapshots_saved; });
  counter("pypto:state_snapshots_evicted_total", "Hybrid models: state snapshots reused for newer ones (LRU).",
          [](const EngineGauges& g) { return g.state_snapshots_evicted; });
  counter("pypto:prefix_cache_tokens_without_state_total",
          "Hybrid models: cached tokens a hit could not use because no state snapshot ends there.",
          [](const EngineGauges& g) { return g.prefix_cache_tokens_without_state; });
  // Long prompts' prefill (engine/prefill_progress.h): the gauges move with every chunk.
  gauge("pypto:prefill_requests", "Running requests whose prompt is still being prefilled.",
        [](const EngineGauges& g) { return g.prefill.requests; });
  gauge("pypto:prefill_prompt_tokens_computed",
        "Of the prompts being prefilled, tokens whose KV is in the cache (prefix-cache hits included).",
        [](const EngineGauges& g) { return g.prefill.computed_tokens; });
  gauge("pypto:prefill_prompt_tokens", "Prompt tokens of the requests being prefilled.",
        [](const EngineGauges& g) { return g.prefill.prompt_tokens; });
  counter("pypto:prefill_tokens_computed_total",
          "Prompt tokens computed by the model, counted per step (not prefix-cache hits; recompute counts again).",
          [](const EngineGauges& g) { return g.prefill.computed_total; });
  render_spec_decode_metrics(out, gauges, labels);
  gauge("pypto:engine_active_requests", "Requests (sequences) the engine loop holds: queued, running or finishing.",
        [](const EngineGauges& g) { return g.num_active_requests; });

  header(out, "vllm:request_success_total", "counter", "Count of finished requests, by finish reason.");
  for (size_t i = 0; i < engines_.size(); ++i)
    for (const char* reason : {"stop", "length", "abort", "error"}) {
      auto it = engines_[i].success.find(reason);
      out += "vllm:request_success_total{" + labels(i) + ",finished_reason=\"" + reason + "\"} " +
             std::to_string(it == engines_[i].success.end() ? 0 : it->second) + "\n";
    }
  header(out, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  for (size_t i = 0; i < engines_.size(); ++i)
    out += "vllm:prompt_tokens_total{" + labels(i) + "} " + std::to_string(engines_[i].prompt_tokens) + "\n";
  header(out, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
  for (size_t i = 0; i < engines_.size(); ++i)
    out += "vllm:generation_tokens_total{" + labels(i) + "} " + std::to_string(engines_[i].generation_tokens) + "\n";

  auto hist = [&](const char* name, const char* help, const Histogram PerEngine::*h) {
    header(out, name, "histogram", help);
    for (size_t i = 0; i < engines_.size(); ++i) (engines_[i].*h).render(out, name, labels(i));
  };
  hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", &PerEngine::ttft);
  hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", &PerEngine::itl);
  hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
       &PerEngine::tpot);
  hist("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", &PerEngine::e2e);
  hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", &PerEngine::queue);
  hist("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
       &PerEngine::inference);
  hist("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.",
       &PerEngine::prefill);
  hist("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", &PerEngine::decode);
  hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", &PerEngine::prompt_len);
  hist("vllm:request_generation_tokens", "Number of generation tokens processed.", &PerEngine::generation_len);

  header(out, "pypto:requests_rejected_total", "counter", "Requests refused before reaching an engine, by reason.");
  for (const char* reason : {"queue_full"}) {
    auto it = rejected_.find(reason);
    out += "pypto:requests_rejected_total{" + model + ",reason=\"" + reason + "\"} " +
           std::to_string(it == rejected_.end() ? 0 : it->second) + "\n";
  }
  header(out, "pypto:pooling_requests_total", "counter", "Requests of the pooling endpoints, by endpoint.");
  for (const char* ep : {"embeddings", "pooling", "rerank", "score"}) {
    auto it = pooling_.find(ep);
    out += "pypto:pooling_requests_total{" + model + ",endpoint=\"" + ep + "\"} " +
           std::to_string(it == pooling_.end() ? 0 : it->second.first) + "\n";
  }
  header(out, "pypto:pooling_inputs_total", "counter", "Inputs (texts, documents) of the pooling endpoints, by endpoint.");
  for (const char* ep : {"embeddings", "pooling", "rerank", "score"}) {
    auto it = pooling_.find(ep);
    out += "pypto:pooling_inputs_total{" + model + ",endpoint=\"" + ep + "\"} " +
           std::to_string(it == pooling_.end() ? 0 : it->second.second) + "\n";
  }
  return out;
}

}  // namespace pypto
