// The per-request phase histograms of /metrics (vLLM's queue / prefill / decode / inference time
// and per-request time per output token) from scripted engine timestamps: which phases exist at
// each stage a sequence can finish in, their values, and what the exposition shows.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>

#include "serve/metrics.h"

namespace pypto {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A sequence that arrived at t0, was first scheduled 2 s later, had its first token after another
// 0.5 s and its last token 2 s after that.
RequestTimes scripted_times() {
  const Clock::time_point t0 = Clock::time_point{} + std::chrono::hours(1);
  RequestTimes t;
  t.arrival = t0;
  t.first_scheduled = t0 + milliseconds(2000);
  t.first_token = t0 + milliseconds(2500);
  t.last_token = t0 + milliseconds(4500);
  return t;
}

// "name{labels} value" of the first line starting with `name{` (the engine-0 series), or -1.
double sample(const std::string& text, const std::string& name, const std::string& extra_label = "") {
  const std::string key = name + "{model_name=\"m\",engine=\"0\"" + extra_label + "} ";
  const size_t at = text.find("\n" + key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + 1 + key.size()));
}

TEST(RequestPhaseTimes, VllmDefinitions) {
  const RequestPhaseTimes p = request_phase_times(scripted_times(), 5);
  ASSERT_TRUE(p.queue && p.prefill && p.decode && p.inference && p.time_per_output_token);
  EXPECT_DOUBLE_EQ(*p.queue, 2.0);
  EXPECT_DOUBLE_EQ(*p.prefill, 0.5);
  EXPECT_DOUBLE_EQ(*p.decode, 2.0);
  EXPECT_DOUBLE_EQ(*p.inference, 2.5);
  EXPECT_DOUBLE_EQ(*p.inference, *p.prefill + *p.decode);
  EXPECT_DOUBLE_EQ(*p.time_per_output_token, 0.5);  // 2 s over the 4 tokens after the first
}

TEST(RequestPhaseTimes, OnlyWhatTheSequenceReached) {
  RequestTimes t = scripted_times();
  // One token: no decode to divide, so no time per output token (vLLM: mean_tpot None).
  t.last_token = t.first_token;
  RequestPhaseTimes p = request_phase_times(t, 1);
  EXPECT_TRUE(p.queue && p.prefill && p.inference);
  EXPECT_EQ(p.decode, 0.0);
  EXPECT_FALSE(p.time_per_output_token);
  // Scheduled but aborted before its first token: the queue time only.
  t.first_token.reset();
  t.last_token.reset();
  p = request_phase_times(t, 0);
  EXPECT_EQ(p.queue, 2.0);
  EXPECT_FALSE(p.prefill || p.decode || p.inference || p.time_per_output_token);
  // Never scheduled: nothing.
  t.first_scheduled.reset();
  p = request_phase_times(t, 0);
  EXPECT_FALSE(p.queue || p.prefill || p.decode || p.inference || p.time_per_output_token);
}

TEST(ServerMetrics, PhaseHistogramsInTheExposition) {
  ServerMetrics m(1, 256);
  const std::vector<EngineGauges> gauges(1);
  const char* names[] = {"vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
                         "vllm:request_decode_time_seconds", "vllm:request_inference_time_seconds",
                         "vllm:request_time_per_output_token_seconds"};
  std::string text = m.render("m", gauges);
  for (const char* name : names) {
    EXPECT_NE(text.find(std::string("# TYPE ") + name + " histogram\n"), std::string::npos) << name;
    EXPECT_EQ(sample(text, std::string(name) + "_count"), 0) << name;
  }

  m.request_finished(0, "length", 7, 5, 4.75, request_phase_times(scripted_times(), 5));
  text = m.render("m", gauges);
  for (const char* name : names) EXPECT_EQ(sample(text, std::string(name) + "_count"), 1) << name;
  EXPECT_DOUBLE_EQ(sample(text, "vllm:request_queue_time_seconds_sum"), 2.0);
  EXPECT_DOUBLE_EQ(sample(text, "vllm:request_prefill_time_seconds_sum"), 0.5);
  EXPECT_DOUBLE_EQ(sample(text, "vllm:request_decode_time_seconds_sum"), 2.0);
  EXPECT_DOUBLE_EQ(sample(text, "vllm:request_inference_time_seconds_sum"), 2.5);
  EXPECT_DOUBLE_EQ(sample(text, "vllm:request_time_per_output_token_seconds_sum"), 0.5);
  // vLLM's buckets: 2.0 lands in le="2.0" of the request-latency buckets (not le="1.5"), 0.5 in
  // le="0.5" of the token-latency buckets (not le="0.4"); every histogram ends with 7680 / 80.
  EXPECT_EQ(sample(text, "vllm:request_queue_time_seconds_bucket", ",le=\"1.5\""), 0);
  EXPECT_EQ(sample(text, "vllm:request_queue_time_seconds_bucket", ",le=\"2.0\""), 1);
  EXPECT_EQ(sample(text, "vllm:request_inference_time_seconds_bucket", ",le=\"2.5\""), 1);
  EXPECT_EQ(sample(text, "vllm:request_inference_time_seconds_bucket", ",le=\"7680.0\""), 1);
  EXPECT_EQ(sample(text, "vllm:request_time_per_output_token_seconds_bucket", ",le=\"0.4\""), 0);
  EXPECT_EQ(sample(text, "vllm:request_time_per_output_token_seconds_bucket", ",le=\"0.5\""), 1);
  EXPECT_EQ(sample(text, "vllm:request_time_per_output_token_seconds_bucket", ",le=\"80.0\""), 1);
  EXPECT_EQ(sample(text, "vllm:request_prefill_time_seconds_bucket", ",le=\"0.3\""), 0);  // first bucket
  EXPECT_EQ(std::regex_search(text, std::regex("vllm:request_decode_time_seconds_bucket\\{[^}]*le=\"0\\.25\"")), false);

  // A one-token sequence: every phase but time per output token; an abort while queued: none.
  RequestTimes one = scripted_times();
  one.last_token = one.first_token;
  m.request_finished(0, "length", 7, 1, 3.0, request_phase_times(one, 1));
  RequestTimes queued = scripted_times();
  queued.first_scheduled.reset();
  m.request_finished(0, "abort", 7, 0, 1.0, request_phase_times(queued, 0));
  text = m.render("m", gauges);
  EXPECT_EQ(sample(text, "vllm:e2e_request_latency_seconds_count"), 3);
  EXPECT_EQ(sample(text, "vllm:request_queue_time_seconds_count"), 2);
  EXPECT_EQ(sample(text, "vllm:request_inference_time_seconds_count"), 2);
  EXPECT_EQ(sample(text, "vllm:request_decode_time_seconds_count"), 2);
  EXPECT_EQ(sample(text, "vllm:request_time_per_output_token_seconds_count"), 1);
  EXPECT_DOUBLE_EQ(sample(text, "vllm:request_prefill_time_seconds_sum"), 1.0);
}

// A long prompt's prefill progress (engine/prefill_progress.h) as gauges and a counter per engine.
TEST(ServerMetrics, PrefillProgressInTheExposition) {
  ServerMetrics m(1, 40000);
  std::vector<EngineGauges> gauges(1);
  gauges[0].prefill = PrefillProgress{1, 12288, 32000, 14336};
  const std::string text = m.render("m", gauges);
  EXPECT_NE(text.find("# TYPE pypto:prefill_prompt_tokens_computed gauge\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE pypto:prefill_tokens_computed_total counter\n"), std::string::npos) << text;
  EXPECT_EQ(sample(text, "pypto:prefill_requests"), 1);
  EXPECT_EQ(sample(text, "pypto:prefill_prompt_tokens_computed"), 12288);
  EXPECT_EQ(sample(text, "pypto:prefill_prompt_tokens"), 32000);
  EXPECT_EQ(sample(text, "pypto:prefill_tokens_computed_total"), 14336);
}

}  // namespace
}  // namespace pypto
