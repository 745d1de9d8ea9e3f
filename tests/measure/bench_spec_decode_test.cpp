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

TEST(BenchSpecDecode, NoCountersNoFigures) {
  EXPECT_FALSE(parse_spec_decode_counters("vllm:num_preemptions_total{engine=\"0\"} 3\n").has_value());
  EXPECT_FALSE(parse_spec_decode_counters("").has_value());
}

}  // namespace
}  // namespace pypto::bench
