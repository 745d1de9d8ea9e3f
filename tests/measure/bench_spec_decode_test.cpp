// bench serve's reading of the server's speculative-decoding counters (cli/bench_spec_decode.h):
// the three vllm:spec_decode_* counters summed over engines, other lines ignored, nothing when the
// server does not speculate.
#include <gtest/gtest.h>

#include "cli/bench_spec_decode.h"

namespace pypto::bench {
namespace {

TEST(BenchSpecDecode, SumsTheCountersOverEngines) {
  const std::string text =
      "# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n"
      "# TYPE vllm:spec_decode_num_drafts_total counter\n"
      "vllm:spec_decode_num_drafts_total{model_name=\"m\",engine=\"0\"} 4\n"
      "vllm:spec_decode_num_drafts_total{model_name=\"m\",engine=\"1\"} 6\n"
      "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\",engine=\"0\"} 30\n"
      "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\",engine=\"0\"} 12\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{model_name=\"m\",engine=\"0\",position=\"0\"} 9\n"
      "vllm:num_preemptions_total{model_name=\"m\",engine=\"0\"} 3\n";
  const auto c = parse_spec_decode_counters(text);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->drafts, 10);
  EXPECT_EQ(c->draft_tokens, 30);
  EXPECT_EQ(c->accepted_tokens, 12);  // the per-position series is not summed in
  const auto d = spec_decode_delta(SpecDecodeCounters{2, 10, 5}, c);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->drafts, 8);
  EXPECT_EQ(d->accepted_tokens, 7);
  EXPECT_FALSE(spec_decode_delta(std::nullopt, c).has_value());
}

TEST(BenchSpecDecode, ReadsTheCostModelsSteps) {
  const std::string text =
      "vllm:spec_decode_num_drafts_total{model_name=\"m\",engine=\"0\"} 4\n"
      "pypto:spec_decode_steps_speculating_total{model_name=\"m\",engine=\"0\"} 40\n"
      "pypto:spec_decode_steps_speculating_total{model_name=\"m\",engine=\"1\"} 2\n"
      "pypto:spec_decode_steps_plain_total{model_name=\"m\",engine=\"0\"} 58\n"
      "pypto:spec_decode_probes_total{model_name=\"m\",engine=\"0\"} 3\n"
      "pypto:spec_decode_chosen_k_total{model_name=\"m\",engine=\"0\",k=\"0\"} 99\n";
  const auto c = parse_spec_decode_counters(text);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->steps_speculating, 42);
  EXPECT_EQ(c->steps_plain, 58);
  EXPECT_EQ(c->probes, 3);
  const auto d = spec_decode_delta(SpecDecodeCounters{.steps_speculating = 2, .steps_plain = 8, .probes = 1}, c);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->steps_speculating, 40);
  EXPECT_EQ(d->steps_plain, 50);
  EXPECT_EQ(d->probes, 2);
}

TEST(BenchSpecDecode, NoCountersNoFigures) {
  EXPECT_FALSE(parse_spec_decode_counters("vllm:num_preemptions_total{engine=\"0\"} 3\n").has_value());
  EXPECT_FALSE(parse_spec_decode_counters("").has_value());
}

}  // namespace
}  // namespace pypto::bench
