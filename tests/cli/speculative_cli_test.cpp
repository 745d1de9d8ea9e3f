// --speculative-config through the real binary on the tiny random-weight model: an offline run
// with n-gram speculation prints the same tokens as without and reports its acceptance; bad
// configs are refused naming the key. (Hybrid targets: hybrid_speculative_cli_test.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "model/test_model.h"
#include "cli_test_models.h"
#include "run_binary.h"

namespace fs = std::filesystem;

namespace {

using pypto::test::has;
using pypto::test::RunResult;
using pypto::test::printed_token_ids;
using pypto::test::run;
using pypto::test::speculative_line;

class SpeculativeCli : public pypto::test::CliTestModels<SpeculativeCli> {
 protected:
  static void SetUpTestSuite() {
    start_models("pypto_spec_cli_");
    for (const char* preset : {"tiny"}) {
      pypto::TestModelOptions o;
      o.preset = preset;
      make_model(preset, o);
    }
  }
  static std::string model(const char* preset = "tiny") { return (dir_ / preset).string(); }
};

// A prompt of repeated text; the tiny model's greedy output repeats a token, so drafts are
// proposed and accepted.
TEST_F(SpeculativeCli, OfflineOutputIsUnchangedAndAcceptanceIsReported) {
  const std::string base = "--model " + model() + " --kv-cache-memory 16MiB --max-model-len 256 --prompt "
                           "'one two three one two three one two three' --generate-config "
                           "'{\"max_tokens\": 24, \"temperature\": 0}'";
  const RunResult plain = run(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const RunResult spec = run(base + " --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, \"cost_model\": false, "
                                    "\"prompt_lookup_min\": 2, \"prompt_lookup_max\": 4}'");
  ASSERT_EQ(spec.exit_code, 0) << spec.output;
  ASSERT_FALSE(printed_token_ids(plain.output).empty()) << plain.output;
  EXPECT_EQ(printed_token_ids(spec.output), printed_token_ids(plain.output)) << spec.output;
  const auto sl = speculative_line(spec.output);
  ASSERT_TRUE(sl) << spec.output;
  EXPECT_GT(sl->accepted, 0) << spec.output;
  EXPECT_FALSE(has(plain.output, "[speculative]")) << plain.output;
}

std::string line_of(const std::string& output, const std::string& key) {
  const size_t at = output.find("\n" + key);
  if (at == std::string::npos) return "";
  return output.substr(at + 1, output.find('\n', at + 1) - at - 1);
}

// A stop string taken from the middle of the plain output (inside what speculation accepts as
// one run) cuts both runs at the same token and the same text.
TEST_F(SpeculativeCli, StopStringInsideAnAcceptedRunCutsThere) {
  const std::string base = "--model " + model() + " --kv-cache-memory 16MiB --max-model-len 256 --prompt "
                           "'one two three one two three one two three' ";
  const std::string spec = " --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 6, \"cost_model\": false, "
                           "\"prompt_lookup_min\": 1, \"prompt_lookup_max\": 3}'";
  const RunResult free_run = run(base + "--generate-config '{\"max_tokens\": 24, \"temperature\": 0}'");
  ASSERT_EQ(free_run.exit_code, 0) << free_run.output;
  const std::string text = line_of(free_run.output, "text: ").substr(6);
  ASSERT_GE(text.size(), 32u) << free_run.output;
  // Whole UTF-8 characters (the random model writes any script): start and end on lead bytes.
  auto lead = [&](size_t i) { return i >= text.size() || (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80; };
  size_t from = text.size() / 2, to = from + 5;
  while (!lead(from)) ++from;
  while (!lead(to)) ++to;
  std::string stop = text.substr(from, to - from);
  for (char& c : stop)
    if (c == '\'' || c == '"' || c == '\\') c = ' ';  // keep the shell and JSON quoting simple
  ASSERT_NE(stop.find_first_not_of(' '), std::string::npos) << text;
  const std::string cfg = "--generate-config '{\"max_tokens\": 24, \"temperature\": 0, \"stop\": [\"" + stop + "\"]}'";
  const RunResult plain = run(base + cfg);
  const RunResult sped = run(base + cfg + spec);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(sped.exit_code, 0) << sped.output;
  EXPECT_EQ(line_of(plain.output, "finish_reason: "), "finish_reason: stop") << plain.output;
  for (const char* key : {"text: ", "token_ids: ", "finish_reason: "})
    EXPECT_EQ(line_of(sped.output, key), line_of(plain.output, key)) << key << "\n" << sped.output;
  EXPECT_LT(line_of(plain.output, "text: ").size(), text.size() + 6);  // the stop string did cut it
  EXPECT_TRUE(has(sped.output, "[speculative]")) << sped.output;
}

// Tensor, pipeline and data parallel ranks build the verify rows with the same batch builder:
// each layout prints the same token ids with speculation as the single rank without it.
TEST_F(SpeculativeCli, ParallelLayoutsGiveTheSameTokens) {
  const std::string base = "--model " + model() + " --kv-cache-memory 16MiB --max-model-len 256 --prompt "
                           "'one two three one two three one two three' --prompt 'alpha beta gamma delta' "
                           "--generate-config '{\"max_tokens\": 20, \"temperature\": 0}'";
  const std::string spec = " --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, \"cost_model\": false, "
                           "\"prompt_lookup_min\": 2, \"prompt_lookup_max\": 4}'";
  const RunResult one = run(base);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  ASSERT_FALSE(printed_token_ids(one.output).empty()) << one.output;
  for (const char* layout : {"--tp 2 --devices 0,1", "--pp 2 --devices 0,1", "--dp 2 --devices 0,1"}) {
    const RunResult r = run(base + " " + layout + spec);
    ASSERT_EQ(r.exit_code, 0) << layout << "\n" << r.output;
    EXPECT_EQ(printed_token_ids(r.output), printed_token_ids(one.output)) << layout << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "[speculative]")) << layout;
  }
}

// A draft model that is the target's own checkpoint: the same tokens as without speculation and
// every draft accepted, in an offline run of two prompts batched, alone and under --tp, --pp, --dp.
TEST_F(SpeculativeCli, TheTargetAsItsOwnDraftModelAcceptsEveryDraft) {
  const std::string base = "--model " + model() + " --kv-cache-memory 16MiB --max-model-len 256 --prompt "
                           "'one two three four' --prompt 'alpha beta gamma delta' "
                           "--generate-config '{\"max_tokens\": 20, \"temperature\": 0}'";
  const std::string spec = " --speculative-config '{\"model\": \"" + model() + "\", \"num_speculative_tokens\": 3, \"cost_model\": false}'";
  const RunResult plain = run(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const RunResult sped = run(base + spec);
  ASSERT_EQ(sped.exit_code, 0) << sped.output;
  ASSERT_FALSE(printed_token_ids(plain.output).empty()) << plain.output;
  EXPECT_EQ(printed_token_ids(sped.output), printed_token_ids(plain.output)) << sped.output;
  const auto sl = speculative_line(sped.output);
  ASSERT_TRUE(sl) << sped.output;
  EXPECT_GT(sl->draft_tokens, 0) << sped.output;
  EXPECT_EQ(sl->accepted, sl->draft_tokens) << sped.output;
  // The draft runs unsharded on rank 0 of each replica (each --dp replica has its own draft and
  // KV pool), with rank processes (the default for --tp / --pp) or threads (the default for
  // --dp): every layout prints the plain single-rank tokens and accepts every draft.
  for (const char* layout : {"--tp 2 --devices 0,1", "--pp 2 --devices 0,1", "--dp 2 --devices 0,1"}) {
    const RunResult r = run(base + " " + layout + spec);
    ASSERT_EQ(r.exit_code, 0) << layout << "\n" << r.output;
    EXPECT_EQ(printed_token_ids(r.output), printed_token_ids(plain.output)) << layout << "\n" << r.output;
    const auto rl = speculative_line(r.output);
    ASSERT_TRUE(rl) << layout << "\n" << r.output;
    EXPECT_GT(rl->draft_tokens, 0) << layout;
    EXPECT_EQ(rl->accepted, rl->draft_tokens) << layout << "\n" << r.output;
  }
}

// The draft model where a replica's rank 0 is not the engine thread's own: --dp 2 replicas of rank
// processes (mp, and mpi under mpirun: replica 1's engine runs in rank 0's process, its drafter on
// a pool of its own there) and --pp-virtual-engines (threads, mp: each engine's drafter on
// stage 0's rank 0, its passes run by the pipeline thread between the engines' steps). Each engine
// has its own drafter and draft KV pool; the target as its own draft accepts every greedy draft,
// so a drafter whose KV or state another engine's requests overwrote would show in the counts.
// Every layout prints the single-rank tokens without speculation and the single-rank
// speculative run's draft / accepted counts (the two prompts go to the two engines).
TEST_F(SpeculativeCli, DraftModelUnderRankReplicasAndVirtualEnginesMatchesOneRank) {
  const std::string base = "--model " + model() + " --kv-cache-memory 16MiB --max-model-len 256 --prompt "
                           "'one two three four' --prompt 'alpha beta gamma delta' "
                           "--generate-config '{\"max_tokens\": 20, \"temperature\": 0}'";
  const std::string spec = " --speculative-config '{\"model\": \"" + model() + "\", \"num_speculative_tokens\": 3, \"cost_model\": false}'";
  const std::string mpirun = pypto::test::mpirun_prefix();
  struct Layout {
    std::string launcher, args, placement;
  };
  const Layout layouts[] = {
      {"", " --dp 2 --devices 0,1 --distributed-executor-backend mp",
       "each replica's draft model in rank 0's process, on the cores of the replica's first rank"},
      {mpirun + "-np 2 ", " --dp 2 --distributed-executor-backend mpi",
       "each replica's draft model in rank 0's process, on this host's cores"},
      {"", " --pp 2 --devices 0,1 --pp-virtual-engines --distributed-executor-backend threads",
       "each engine's draft model on stage 0's rank 0"},
      {"", " --pp 2 --devices 0,1 --pp-virtual-engines --distributed-executor-backend mp",
       "each engine's draft model on stage 0's rank 0"},  // mpi: the same rank-0 code (pipelined_rank0)
  };
  const RunResult plain = run(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_FALSE(printed_token_ids(plain.output).empty()) << plain.output;
  const RunResult one = run(base + spec);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto s1 = speculative_line(one.output);
  ASSERT_TRUE(s1) << one.output;
  ASSERT_GT(s1->draft_tokens, 0) << one.output;
  ASSERT_EQ(s1->accepted, s1->draft_tokens) << one.output;
  bool skipped_mpi = false;
  for (const Layout& l : layouts) {
    if (has(l.args, "mpi") && mpirun.empty()) {
      skipped_mpi = true;
      continue;
    }
    const RunResult r = pypto::test::run_shell(l.launcher + pypto::test::kBinary + " " + base + spec + l.args);
    ASSERT_EQ(r.exit_code, 0) << l.args << "\n" << r.output;
    EXPECT_TRUE(has(r.output, l.placement)) << l.args << "\n" << r.output;
    EXPECT_EQ(printed_token_ids(r.output), printed_token_ids(plain.output)) << l.args << "\n" << r.output;
    const auto s2 = speculative_line(r.output);
    ASSERT_TRUE(s2) << l.args << "\n" << r.output;
    EXPECT_EQ(s2->drafts, s1->drafts) << l.args;
    EXPECT_EQ(s2->draft_tokens, s1->draft_tokens) << l.args;
    EXPECT_EQ(s2->accepted, s1->accepted) << l.args;
  }
  if (skipped_mpi) GTEST_SKIP() << "the mpi layouts: " << pypto::test::kNoMpi;
}

TEST_F(SpeculativeCli, BadConfigsAreRefused) {
  const std::string base = "--kv-cache-memory 16MiB --max-model-len 256 --prompt hi --speculative-config ";
  RunResult r = run("--model " + model() + " " + base + "'{\"method\": \"ngram\", \"num_speculative_tokens\": 40}'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "'num_speculative_tokens' must be an integer in [1, 16], got 40")) << r.output;
}

}  // namespace
