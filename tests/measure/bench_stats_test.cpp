// Statistics of bench serve on synthetic timelines with exact expected values (vLLM's
// definitions: TPOT over requests with > 1 output token, ITL pooled over chunks, numpy
// percentiles).
#include <gtest/gtest.h>

#include "cli/bench_stats.h"

namespace pypto::bench {
namespace {

TEST(BenchStats, PercentileInterpolatesLikeNumpy) {
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile({4, 3, 2, 1}, 99), 3.97);  // 1 + 0.99·3 = rank 2.97
  EXPECT_DOUBLE_EQ(percentile({7}, 99), 7.0);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0.0);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4, 5}, 100), 5.0);
}

TEST(BenchStats, SummaryUsesPopulationStd) {
  Summary s = summarize({2, 4, 4, 4, 5, 5, 7, 9}, {99});
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_DOUBLE_EQ(s.stdev, 2.0);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_DOUBLE_EQ(s.min, 2.0);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
}

RequestTiming timeline(double ttft, std::vector<double> gaps, int64_t tokens, int64_t prompt = 10) {
  RequestTiming r;
  r.success = true;
  r.prompt_len = prompt;
  r.ttft_s = ttft;
  r.itl_s = gaps;
  r.latency_s = ttft;
  for (double g : gaps) r.latency_s += g;
  r.output_tokens = tokens;
  return r;
}

TEST(BenchStats, TpotItlE2elFromTimelines) {
  // A: ttft 0.1, 4 chunks 0.02 apart -> e2e 0.18, 5 tokens -> TPOT (0.18-0.1)/4 = 0.02.
  // B: ttft 0.3, one chunk of 3 tokens 0.06 later -> TPOT 0.03, ITL 0.06 (ITL grows, TPOT not).
  // C: a single token: no TPOT, no ITL.
  // D: failed: counted only as failed.
  std::vector<RequestTiming> rs = {timeline(0.1, {0.02, 0.02, 0.02, 0.02}, 5), timeline(0.3, {0.06}, 3),
                                   timeline(0.2, {}, 1)};
  RequestTiming d;
  d.error = "HTTP 500";
  rs.push_back(d);
  ServeMetrics m = compute_serve_metrics(rs, 2.0, {50, 99});
  EXPECT_EQ(m.completed, 3u);
  EXPECT_EQ(m.failed, 1u);
  EXPECT_EQ(m.total_input, 30);
  EXPECT_EQ(m.total_output, 9);
  EXPECT_DOUBLE_EQ(m.request_throughput, 1.5);
  EXPECT_DOUBLE_EQ(m.output_throughput, 4.5);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 19.5);
  ASSERT_EQ(m.tpots_ms.size(), 2u);
  EXPECT_NEAR(m.tpot_ms.mean, 25.0, 1e-9);
  ASSERT_EQ(m.itls_ms.size(), 5u);
  EXPECT_NEAR(m.itl_ms.mean, (4 * 20.0 + 60.0) / 5, 1e-9);
  EXPECT_NEAR(m.itl_ms.median, 20.0, 1e-9);
  EXPECT_NEAR(m.ttft_ms.mean, 200.0, 1e-9);
  EXPECT_NEAR(m.ttft_ms.median, 200.0, 1e-9);
  EXPECT_NEAR(m.e2el_ms.mean, (180.0 + 360.0 + 200.0) / 3, 1e-9);
}

TEST(BenchStats, TpotNeedsTwoTokens) {
  EXPECT_LT(request_tpot_s(timeline(0.1, {}, 1)), 0);
  EXPECT_DOUBLE_EQ(request_tpot_s(timeline(0.1, {0.5}, 2)), 0.5);
}

TEST(BenchStats, JsonHasEveryMetric) {
  ServeMetrics m = compute_serve_metrics({timeline(0.1, {0.02}, 2)}, 1.0);
  auto j = metrics_json(m);
  for (const char* k : {"completed", "failed", "duration_s", "request_throughput", "output_throughput", "ttft_ms", "tpot_ms",
                        "itl_ms", "e2el_ms"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_TRUE(j["ttft_ms"].contains("p99"));
  EXPECT_TRUE(j["ttft_ms"].contains("median"));
}

}  // namespace
}  // namespace pypto::bench
