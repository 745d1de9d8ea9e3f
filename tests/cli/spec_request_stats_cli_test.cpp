// --per-request-spec-decode-stats through the real binary (offline mode, --output-json) on tiny
// random-weight checkpoints: each result's speculative_decoding_stats add up to the run's
// `[speculative]` line (the engine's counters) for n-gram drafts, a random-weight draft model and
// the target as its own draft; drafters that are always right (the target as its own draft model,
// the MTP oracle checkpoint) give acceptance rate 1 and every verify step in the histogram's
// bucket k; without the option there is no field; bad values and the option without
// --speculative-config are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_test_models.h"
#include "model/test_model.h"
#include "run_binary.h"

namespace {

using pypto::test::has;
using pypto::test::RunResult;
using pypto::test::run;
using pypto::test::speculative_line;
using json = nlohmann::json;

class SpecRequestStatsCli : public pypto::test::CliTestModels<SpecRequestStatsCli> {
 protected:
  static void SetUpTestSuite() {
    start_models("pypto_spec_stats_cli_");
    make_model("tiny", pypto::TestModelOptions{});
    pypto::TestModelOptions d;  // the same shapes and tokenizer, other random weights
    d.seed = 1;
    make_model("tiny-draft", d);
    pypto::TestModelOptions h;
    h.preset = "tiny-hybrid";
    h.mtp = "oracle";
    make_model("tiny-hybrid-oracle", h);
  }

  struct Offline {
    RunResult run;
    json results;  // --output-json's "results"
  };
  // An offline run of `model` with ARGS, its output and --output-json results.
  Offline offline(const std::string& model, const std::string& args) {
    const std::string path = (dir_ / "out.json").string();
    std::filesystem::remove(path);
    Offline o{run("--model " + model_path(model) + " --kv-cache-memory 16MiB --max-model-len 256 --output-json " + path +
                  " " + args),
              json()};
    EXPECT_EQ(o.run.exit_code, 0) << o.run.output;
    std::ifstream f(path);
    if (f) o.results = json::parse(f)["results"];
    return o;
  }

  // Every result has the stats, consistent in itself; their sums equal the [speculative] line.
  static void expect_sums_match_the_engine(const Offline& o, int k) {
    const auto line = speculative_line(o.run.output);
    ASSERT_TRUE(line) << o.run.output;
    ASSERT_FALSE(o.results.empty()) << o.run.output;
    long long steps = 0, drafted = 0, accepted = 0;
    for (const json& r : o.results) {
      ASSERT_TRUE(r.contains("speculative_decoding_stats")) << r.dump();
      const json& s = r["speculative_decoding_stats"];
      EXPECT_EQ(s["num_spec_tokens"], k);
      ASSERT_EQ(s["acceptance_histogram"].size(), size_t(k) + 1) << s.dump();
      long long hist_steps = 0, hist_accepted = 0;
      for (size_t a = 0; a <= size_t(k); ++a) {
        hist_steps += s["acceptance_histogram"][a].get<long long>();
        hist_accepted += (long long)a * s["acceptance_histogram"][a].get<long long>();
      }
      EXPECT_EQ(hist_steps, s["num_spec_steps"].get<long long>()) << s.dump();
      EXPECT_EQ(hist_accepted, s["num_accepted_draft_tokens"].get<long long>()) << s.dump();
      steps += s["num_spec_steps"].get<long long>();
      drafted += s["num_draft_tokens"].get<long long>();
      accepted += s["num_accepted_draft_tokens"].get<long long>();
    }
    EXPECT_EQ(steps, line->drafts) << o.run.output;
    EXPECT_EQ(drafted, line->draft_tokens) << o.run.output;
    EXPECT_EQ(accepted, line->accepted) << o.run.output;
    EXPECT_GT(drafted, 0) << o.run.output;
  }
  // Rate 1 and every verify step at k: `steps` steps of k drafts each (max_tokens = 1 + steps (k + 1)).
  static void expect_all_accepted_at_k(const Offline& o, int k, int steps) {
    ASSERT_FALSE(o.results.empty()) << o.run.output;
    for (const json& r : o.results) {
      const json& s = r["speculative_decoding_stats"];
      EXPECT_EQ(s["draft_acceptance_rate"].get<double>(), 1.0) << s.dump();
      EXPECT_EQ(s["mean_acceptance_length"].get<double>(), 1.0 + k) << s.dump();
      json hist = json::array();
      for (int a = 0; a < k; ++a) hist.push_back(0);
      hist.push_back(steps);
      EXPECT_EQ(s["acceptance_histogram"], hist) << s.dump();
      EXPECT_EQ(s["num_spec_steps"], steps) << s.dump();
      EXPECT_EQ(s["num_draft_tokens"], steps * k) << s.dump();
    }
  }
};

const char* kPrompts = " --prompt 'one two three one two three one two three' --prompt 'alpha beta gamma delta'"
                       " --prompt 'the quick brown fox jumps over the lazy dog' ";

TEST_F(SpecRequestStatsCli, NgramStatsAddUpToTheEngineCountersAndDetailedHasTheSteps) {
  const Offline o = offline("tiny", std::string(kPrompts) +
                                        "--generate-config '{\"max_tokens\": 24, \"temperature\": 0}' "
                                        "--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
                                        "\"cost_model\": false, \"prompt_lookup_min\": 1, \"prompt_lookup_max\": 3}' "
                                        "--per-request-spec-decode-stats detailed");
  expect_sums_match_the_engine(o, 4);
  for (const json& r : o.results) {
    const json& s = r["speculative_decoding_stats"];
    ASSERT_EQ(s["draft_tokens_per_step"].size(), s["num_spec_steps"].get<size_t>()) << s.dump();
    ASSERT_EQ(s["accepted_draft_tokens_per_step"].size(), s["num_spec_steps"].get<size_t>()) << s.dump();
  }
}

TEST_F(SpecRequestStatsCli, ARandomWeightDraftModelsCountsAreTheEngines) {
  const Offline o = offline("tiny", std::string(kPrompts) +
                                        "--generate-config '{\"max_tokens\": 20, \"temperature\": 0}' "
                                        "--speculative-config '{\"model\": \"" + model_path("tiny-draft") +
                                        "\", \"num_speculative_tokens\": 3, \"cost_model\": false}' "
                                        "--per-request-spec-decode-stats summary");
  expect_sums_match_the_engine(o, 3);
  const auto line = speculative_line(o.run.output);
  ASSERT_TRUE(line);
  EXPECT_LT(line->accepted, line->draft_tokens) << o.run.output;  // another model: rejections happen
  for (const json& r : o.results) EXPECT_FALSE(r["speculative_decoding_stats"].contains("draft_tokens_per_step"));
}

TEST_F(SpecRequestStatsCli, TheTargetAsItsOwnDraftAcceptsEveryDraftAtK) {
  const Offline o = offline("tiny", std::string(kPrompts) +
                                        "--generate-config '{\"max_tokens\": 21, \"temperature\": 0, \"ignore_eos\": true}' "
                                        "--speculative-config '{\"model\": \"" + model_path("tiny") +
                                        "\", \"num_speculative_tokens\": 3, \"cost_model\": false}' "
                                        "--per-request-spec-decode-stats summary");
  expect_sums_match_the_engine(o, 3);
  expect_all_accepted_at_k(o, 3, 5);
}

TEST_F(SpecRequestStatsCli, TheMtpOracleAcceptsEveryDraftAtK) {
  const Offline o = offline("tiny-hybrid-oracle",
                            "--prompt 'the quick brown fox' --prompt 'one two three four five' "
                            "--generate-config '{\"max_tokens\": 16, \"temperature\": 0, \"ignore_eos\": true}' "
                            "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 2, "
                            "\"cost_model\": false}' --per-request-spec-decode-stats summary");
  expect_sums_match_the_engine(o, 2);
  expect_all_accepted_at_k(o, 2, 5);
}

TEST_F(SpecRequestStatsCli, WithoutTheOptionTheOutputHasNoField) {
  const Offline o = offline("tiny", std::string(kPrompts) +
                                        "--generate-config '{\"max_tokens\": 12, \"temperature\": 0}' "
                                        "--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 2, "
                                        "\"cost_model\": false, \"prompt_lookup_min\": 1, \"prompt_lookup_max\": 3}'");
  ASSERT_EQ(o.results.size(), 3u) << o.run.output;
  for (const json& r : o.results) EXPECT_FALSE(r.contains("speculative_decoding_stats")) << r.dump();
}

TEST_F(SpecRequestStatsCli, BadValuesAndTheOptionWithoutSpeculationAreRefused) {
  const std::string base = "--model " + model_path("tiny") + " --kv-cache-memory 16MiB --max-model-len 256 --prompt hi ";
  RunResult r = run(base + "--speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 2}' "
                           "--per-request-spec-decode-stats full");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "'full' is not a level; allowed: none, summary, detailed")) << r.output;
  r = run(base + "--per-request-spec-decode-stats summary");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "--per-request-spec-decode-stats summary reports speculative decoding per request: it "
                            "needs --speculative-config"))
      << r.output;
  // Serve mode (no --prompt) refuses it the same way, before it starts; the timeout ends a server
  // that would have started anyway (the test then fails).
  r = pypto::test::run_shell("timeout 60 " + pypto::test::kBinary + " " + base.substr(0, base.find(" --prompt")) +
                             " --port 0 --per-request-spec-decode-stats detailed");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "it needs --speculative-config")) << r.output;
  // none is the default: nothing to refuse.
  r = run(base + "--generate-config '{\"max_tokens\": 4}' --per-request-spec-decode-stats none");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace
