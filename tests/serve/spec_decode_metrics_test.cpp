// /metrics for speculative decoding: vLLM's counter names with the engine's counts, a series per
// draft position up to k, and nothing at all when no engine speculates.
#include <gtest/gtest.h>

#include "serve/metrics.h"

namespace pypto {
namespace {

double sample(const std::string& text, const std::string& name, const std::string& extra_label = "") {
  const std::string key = name + "{model_name=\"m\",engine=\"0\"" + extra_label + "} ";
  const size_t at = text.find("\n" + key);
  if (at == std::string::npos) return -1;
  return std::stod(text.substr(at + 1 + key.size()));
}

TEST(SpecDecodeMetrics, VllmCountersFromTheEngine) {
  ServerMetrics m(1, 256);
  std::vector<EngineGauges> gauges(1);
  EXPECT_EQ(m.render("m", gauges).find("spec_decode"), std::string::npos);

  gauges[0].speculative = true;
  gauges[0].num_speculative_tokens = 3;
  gauges[0].spec_decode.observe(3, 2);
  gauges[0].spec_decode.observe(3, 0);
  gauges[0].spec_decode.observe(2, 1);
  const std::string text = m.render("m", gauges);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_drafts_total"), 3);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_draft_tokens_total"), 8);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_accepted_tokens_total"), 3);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total", ",position=\"0\""), 2);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total", ",position=\"1\""), 1);
  EXPECT_EQ(sample(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total", ",position=\"2\""), 0);
  EXPECT_NE(text.find("# TYPE vllm:spec_decode_num_drafts_total counter\n"), std::string::npos);
}

// The draft model's own prefix cache, beside the target's vllm:prefix_cache_*_total.
TEST(SpecDecodeMetrics, TheDraftModelsPrefixCacheBesideTheTargets) {
  ServerMetrics m(1, 256);
  std::vector<EngineGauges> gauges(1);
  gauges[0].speculative = true;
  gauges[0].num_speculative_tokens = 2;
  gauges[0].prefix_cache_queries = 300;
  gauges[0].prefix_cache_hits = 112;
  gauges[0].spec_decode.draft_prefix_cache = {.queried_tokens = 214, .hit_tokens = 96};
  const std::string text = m.render("m", gauges);
  EXPECT_EQ(sample(text, "vllm:prefix_cache_hits_total"), 112);
  EXPECT_EQ(sample(text, "pypto:draft_prefix_cache_queries_total"), 214);
  EXPECT_EQ(sample(text, "pypto:draft_prefix_cache_hits_total"), 96);
  EXPECT_NE(text.find("# TYPE pypto:draft_prefix_cache_hits_total counter\n"), std::string::npos);
}

TEST(SpecDecodeMetrics, TheCostModelsDecisionsUnderThePyptoPrefix) {
  ServerMetrics m(1, 256);
  std::vector<EngineGauges> gauges(1);
  gauges[0].speculative = true;
  gauges[0].num_speculative_tokens = 3;
  SpecCostStats& c = gauges[0].spec_cost;
  c.chosen_k = {40, 0, 2, 17};
  c.steps_speculating = 19;
  c.steps_plain = 25;
  c.probes = 3;
  c.last_k = 3;
  c.speculating = true;
  c.plain_step_s = 0.02;
  c.plain_tokens_per_s = 100;
  std::string text = m.render("m", gauges);
  EXPECT_EQ(sample(text, "pypto:spec_decode_speculating"), 1);
  EXPECT_EQ(sample(text, "pypto:spec_decode_last_k"), 3);
  EXPECT_EQ(sample(text, "pypto:spec_decode_chosen_k_total", ",k=\"0\""), 40);
  EXPECT_EQ(sample(text, "pypto:spec_decode_chosen_k_total", ",k=\"2\""), 2);
  EXPECT_EQ(sample(text, "pypto:spec_decode_chosen_k_total", ",k=\"3\""), 17);
  EXPECT_EQ(sample(text, "pypto:spec_decode_steps_speculating_total"), 19);
  EXPECT_EQ(sample(text, "pypto:spec_decode_steps_plain_total"), 25);
  EXPECT_EQ(sample(text, "pypto:spec_decode_probes_total"), 3);
  EXPECT_DOUBLE_EQ(sample(text, "pypto:spec_decode_plain_step_seconds"), 0.02);
  EXPECT_DOUBLE_EQ(sample(text, "pypto:spec_decode_plain_tokens_per_second"), 100);
  // Not measured yet: NaN, not a number that looks like a measurement.
  EXPECT_NE(text.find("pypto:spec_decode_spec_step_seconds{model_name=\"m\",engine=\"0\"} NaN\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE pypto:spec_decode_speculating gauge\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE pypto:spec_decode_chosen_k_total counter\n"), std::string::npos);
  c.speculating = false;
  text = m.render("m", gauges);
  EXPECT_EQ(sample(text, "pypto:spec_decode_speculating"), 0);
}

}  // namespace
}  // namespace pypto
