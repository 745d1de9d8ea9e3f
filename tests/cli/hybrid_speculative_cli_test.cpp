// --speculative-config on a hybrid (Gated DeltaNet) target through the real binary: n-gram drafts
// on a repetitive prompt print the same tokens as a run without speculation, and the run reports
// its acceptance (rejected drafts roll the recurrent state back, model/gdn_rollback.h). Method mtp
// on an always-accepting checkpoint (make-test-model --mtp oracle) accepts every draft and prints
// the same tokens; the deprecated method names work with a warning; under --dp, --tp and --pp
// (thread ranks, the MTP head sharded over the last stage's TP ranks) it prints what one rank
// prints, with the same acceptance, and so under --tp / --pp rank processes (--distributed-executor-
// backend mp or mpi: the drafter's passes run in the ranks' processes), and so under --dp with rank
// processes and --pp-virtual-engines, and on a head whose drafts depend on the target's hidden rows
// (make-test-model --mtp oracle-hidden) with the same acceptance; a target without an MTP head is
// refused by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "model/test_model.h"
#include "cli_test_models.h"
#include "run_binary.h"

namespace fs = std::filesystem;

namespace {

using pypto::test::has;
using pypto::test::RunResult;
using pypto::test::printed_token_ids;
using pypto::test::run;
using pypto::test::expect_same_counts;
using pypto::test::speculative_line;

class HybridSpeculativeCli : public pypto::test::CliTestModels<HybridSpeculativeCli> {
 protected:
  static void SetUpTestSuite() {
    start_models("pypto_hybrid_spec_cli_");
    for (const char* mtp : {"random", "oracle", "oracle-perturbed", "oracle-hidden"}) {
      pypto::TestModelOptions o;
      o.preset = "tiny-hybrid";
      o.mtp = mtp;
      make_model((std::string("tiny-hybrid-") + mtp), o);
    }
    pypto::TestModelOptions g;  // the oracle pre-quantized: its layers and MTP layer GPTQ-Int4
    g.preset = "tiny-hybrid";
    g.mtp = "oracle";
    g.quant = pypto::QuantMethod::Gptq;
    make_model("tiny-hybrid-oracle-gptq", g);
    pypto::TestModelOptions d;
    make_model("tiny", d);
  }
  static std::string model(const char* name = "tiny-hybrid-random") { return (dir_ / name).string(); }
};

TEST_F(HybridSpeculativeCli, NgramOutputIsUnchangedAndDraftsAreReported) {
  const std::string base = "--model " + model() + " --kv-cache-memory 16MiB --max-model-len 256 --prompt "
                           "'one two three one two three one two three one two three' --generate-config "
                           "'{\"max_tokens\": 24, \"temperature\": 0}'";
  const RunResult plain = run(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const RunResult spec = run(base + " --speculative-config '{\"method\": \"ngram\", \"num_speculative_tokens\": 3, \"cost_model\": false, "
                                    "\"prompt_lookup_min\": 1, \"prompt_lookup_max\": 4}'");
  ASSERT_EQ(spec.exit_code, 0) << spec.output;
  ASSERT_FALSE(printed_token_ids(plain.output).empty()) << plain.output;
  EXPECT_EQ(printed_token_ids(spec.output), printed_token_ids(plain.output)) << spec.output;
  const auto sl = speculative_line(spec.output);
  ASSERT_TRUE(sl) << spec.output;
  EXPECT_GT(sl->draft_tokens, 0) << spec.output;
  EXPECT_NE(spec.output.find("GDN rollback states"), std::string::npos) << spec.output;
}

// Also on the GPTQ-Int4 oracle checkpoint, whose MTP layer is staged as stored (quantized; fc and
// the norms float).
TEST_F(HybridSpeculativeCli, MtpOnTheOracleCheckpointAcceptsEveryDraftAndChangesNothing) {
  for (const std::string ckpt : {"tiny-hybrid-oracle", "tiny-hybrid-oracle-gptq"}) {
    const std::string base = "--model " + model(ckpt.c_str()) + " --kv-cache-memory 16MiB --max-model-len 256 "
                             "--prompt 'the quick brown fox' --generate-config '{\"max_tokens\": 20, \"temperature\": 0}'";
    const RunResult plain = run(base);
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    ASSERT_FALSE(printed_token_ids(plain.output).empty()) << plain.output;
    for (const std::string method : {"mtp", "qwen3_5_mtp"}) {
      if (ckpt == "tiny-hybrid-oracle-gptq" && method != "mtp") continue;
      const RunResult spec = run(base + " --speculative-config '{\"method\": \"" + method + "\", \"num_speculative_tokens\": 2, \"cost_model\": false}'");
      ASSERT_EQ(spec.exit_code, 0) << ckpt << ": " << spec.output;
      EXPECT_EQ(printed_token_ids(spec.output), printed_token_ids(plain.output)) << ckpt << ": " << spec.output;
      const auto sl = speculative_line(spec.output);
      ASSERT_TRUE(sl) << spec.output;
      EXPECT_GT(sl->draft_tokens, 0) << ckpt << ": " << spec.output;
      EXPECT_EQ(sl->accepted, sl->draft_tokens) << ckpt << ": " << spec.output;
      EXPECT_EQ(has(spec.output, "deprecated"), method != "mtp") << spec.output;
    }
  }
}

// --dp replicas (threads) each run the target with their own MTP drafter and KV pool over the
// shared weights: two prompts spread over two replicas print the single-replica tokens, every
// draft accepted.
TEST_F(HybridSpeculativeCli, MtpUnderDataParallelReplicasChangesNothing) {
  const std::string base = "--model " + model("tiny-hybrid-oracle") + " --kv-cache-memory 16MiB --max-model-len 256 "
                           "--prompt 'the quick brown fox' --prompt 'one two three four five' "
                           "--generate-config '{\"max_tokens\": 16, \"temperature\": 0}'";
  const RunResult plain = run(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_FALSE(printed_token_ids(plain.output).empty()) << plain.output;
  const RunResult dp = run(base + " --dp 2 --devices 0,1 --speculative-config '{\"method\": \"mtp\", "
                           "\"num_speculative_tokens\": 2, \"cost_model\": false}'");
  ASSERT_EQ(dp.exit_code, 0) << dp.output;
  EXPECT_TRUE(has(dp.output, "replica 1: one rank with the MTP drafter")) << dp.output;
  EXPECT_EQ(printed_token_ids(dp.output), printed_token_ids(plain.output)) << dp.output;
  const auto sl = speculative_line(dp.output);
  ASSERT_TRUE(sl) << dp.output;
  EXPECT_GT(sl->draft_tokens, 0) << dp.output;
  EXPECT_EQ(sl->accepted, sl->draft_tokens) << dp.output;
}

// --tp 2, --pp 2 and --pp 2 --tp 2 (thread ranks): the target and the MTP head sharded over the
// ranks print the tokens of a run without speculation and of one-rank MTP: on the oracle
// checkpoint every draft accepted, on the perturbed one the one-rank run's partial acceptance
// exactly (the same draft and accepted counts), and a seeded sampled run the one-rank MTP run's
// tokens and counts. (tests/parallel/mtp_tp_engine_test.cpp compares the drafts themselves.)
TEST_F(HybridSpeculativeCli, MtpUnderTensorAndPipelineParallelRanksMatchesOneRank) {
  const std::string prompts = " --kv-cache-memory 16MiB --max-model-len 256 --prompt 'the quick brown fox' "
                              "--prompt 'one two three four five' ";
  const std::string greedy = "--generate-config '{\"max_tokens\": 16, \"temperature\": 0}'";
  const std::string sampled = "--generate-config '{\"max_tokens\": 16, \"temperature\": 0.8, \"seed\": 7}'";
  const std::string mtp = " --speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 3, "
                          "\"cost_model\": false}'";
  const std::vector<std::string> layouts = {" --tp 2 --devices 0,1", " --pp 2 --devices 0,1",
                                            " --pp 2 --tp 2 --devices 0,1,2,3 --cpu-oversubscribe"};
  // (checkpoint, generate config, layouts): the perturbed head's rejections exercise rejection sampling.
  struct Case {
    const char* ck;
    const std::string& gen;
    size_t n_layouts;
  };
  const Case cases[] = {{"tiny-hybrid-oracle", greedy, 2}, {"tiny-hybrid-oracle-perturbed", greedy, 3},
                        {"tiny-hybrid-oracle-perturbed", sampled, 2}};
  for (const Case& c : cases) {
    const bool oracle = std::string(c.ck) == "tiny-hybrid-oracle";
    const std::string base = "--model " + model(c.ck) + prompts;
    const RunResult plain = run(base + greedy);
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    ASSERT_FALSE(printed_token_ids(plain.output).empty()) << plain.output;
    const RunResult one = run(base + c.gen + mtp);
    ASSERT_EQ(one.exit_code, 0) << one.output;
    const auto s1 = speculative_line(one.output);
    ASSERT_TRUE(s1) << one.output;
    for (size_t l = 0; l < c.n_layouts; ++l) {
      const std::string what = std::string(c.ck) + layouts[l] + (&c.gen == &greedy ? " greedy" : " sampled");
      const RunResult two = run(base + c.gen + mtp + layouts[l]);
      ASSERT_EQ(two.exit_code, 0) << what << "\n" << two.output;
      EXPECT_TRUE(has(two.output, "replica 0: the MTP drafter sharded over")) << what << "\n" << two.output;
      EXPECT_EQ(printed_token_ids(two.output), printed_token_ids(one.output)) << what << "\n" << two.output;
      if (&c.gen == &greedy) EXPECT_EQ(printed_token_ids(two.output), printed_token_ids(plain.output)) << what;
      const auto s2 = speculative_line(two.output);
      ASSERT_TRUE(s2) << what << "\n" << two.output;
      expect_same_counts(*s2, *s1, what);
      if (&c.gen != &greedy) continue;
      if (oracle) {
        EXPECT_EQ(s2->accepted, s2->draft_tokens) << what;
      } else {
        EXPECT_GT(s2->accepted, 0) << what;
        EXPECT_LT(s2->accepted, s2->draft_tokens) << "not a partial acceptance: " << what;
      }
    }
  }
}

// --tp 2 and --pp 2 as rank processes (--distributed-executor-backend mp, and mpi under mpirun),
// and --dp 2 replicas of rank processes (replica 1 and its drafter's passes driven over its link,
// its leader sending each step's hidden rows back; with --pp 2 the leader first gets them from its
// last stage): the MTP head's passes run in the ranks' processes (parallel/replicas/
// mtp_rank_pass.h) and print the tokens of one rank without speculation and with it, with the same
// draft and accepted counts: on the oracle every draft accepted, on the perturbed head a partial
// acceptance (rejections roll the MTP context back). The two prompts go to the two replicas. And
// --pp-virtual-engines (threads and rank processes: each engine's drafter's passes travel the
// step pipeline between the engines' steps).
TEST_F(HybridSpeculativeCli, MtpUnderRankProcessesMatchesOneRank) {
  const std::string prompts = " --kv-cache-memory 16MiB --max-model-len 256 --prompt 'the quick brown fox' "
                              "--prompt 'one two three four five' --generate-config '{\"max_tokens\": 16, "
                              "\"temperature\": 0}'";
  const std::string mtp = " --speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 3, "
                          "\"cost_model\": false}'";
  const std::string mpirun = pypto::test::mpirun_prefix();
  // (launcher, layout, the placement line it prints, checkpoints: 1 oracle, 2 perturbed, 3 both)
  struct Layout {
    std::string launcher, args, placement;
    int checkpoints;
  };
  const Layout layouts[] = {
      {"", " --tp 2 --devices 0,1 --distributed-executor-backend mp", "process group of 2 ranks", 1},
      {"", " --pp 2 --devices 0,1 --distributed-executor-backend mp", "process group of 2 ranks", 2},
      {"", " --dp 2 --devices 0,1 --distributed-executor-backend mp", "process group of 2 replicas of 1 ranks", 3},
      {"", " --dp 2 --pp 2 --devices 0,1,2,3 --cpu-oversubscribe --distributed-executor-backend mp",
       "process group of 2 replicas of 2 ranks", 2},
      {mpirun + "-np 2 ", " --tp 2 --distributed-executor-backend mpi", "process group of 2 ranks", 1},
      {mpirun + "-np 4 ", " --dp 2 --pp 2 --distributed-executor-backend mpi", "process group of 2 replicas of 2 ranks",
       2},
      // --pp-virtual-engines: two engines over the stages, each with its own drafter and stretch of
      // the MTP pool (threads, mp, mpi; tests/parallel compares the drafts themselves).
      {"", " --pp 2 --pp-virtual-engines --devices 0,1", "2 virtual engines of", 2},
      {"", " --pp 2 --pp-virtual-engines --devices 0,1 --distributed-executor-backend mp", "2 virtual engines of", 1},
      {mpirun + "-np 2 ", " --pp 2 --pp-virtual-engines --distributed-executor-backend mpi", "2 virtual engines of", 2},
  };
  bool skipped_mpi = false;
  for (const char* ck : {"tiny-hybrid-oracle", "tiny-hybrid-oracle-perturbed"}) {
    const bool oracle = std::string(ck) == "tiny-hybrid-oracle";
    const std::string base = "--model " + model(ck) + prompts;
    const RunResult plain = run(base);
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    ASSERT_FALSE(printed_token_ids(plain.output).empty()) << plain.output;
    const RunResult one = run(base + mtp);
    ASSERT_EQ(one.exit_code, 0) << one.output;
    const auto s1 = speculative_line(one.output);
    ASSERT_TRUE(s1) << one.output;
    for (const Layout& l : layouts) {
      if (!(l.checkpoints & (oracle ? 1 : 2))) continue;  // a few rejection cases are enough
      const bool mpi = has(l.args, "mpi");
      if (mpi && mpirun.empty()) {
        skipped_mpi = true;
        continue;
      }
      const std::string what = std::string(ck) + l.args;
      const RunResult r = pypto::test::run_shell(l.launcher + pypto::test::kBinary + " " + base + mtp + l.args);
      ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.output;
      EXPECT_TRUE(has(r.output, l.placement)) << what << "\n" << r.output;
      EXPECT_TRUE(has(r.output, "MTP drafter's passes on the")) << what << "\n" << r.output;
      EXPECT_EQ(printed_token_ids(r.output), printed_token_ids(plain.output)) << what << "\n" << r.output;
      const auto s2 = speculative_line(r.output);
      ASSERT_TRUE(s2) << what << "\n" << r.output;
      expect_same_counts(*s2, *s1, what);
      if (oracle) {
        EXPECT_EQ(s2->accepted, s2->draft_tokens) << what;
      } else {
        EXPECT_GT(s2->accepted, 0) << what;
        EXPECT_LT(s2->accepted, s2->draft_tokens) << "not a partial acceptance: " << what;
      }
    }
  }
  if (skipped_mpi) GTEST_SKIP() << "the mpi layouts: " << pypto::test::kNoMpi;
}

// The oracle checkpoints' heads read only the embedding half of fc, so the test above would pass
// with any hidden rows. On "oracle-hidden" (fc = [I | I/8]) each draft also depends on the target's
// final normed hidden row h_t: one rank accepts only some drafts, and a rank-process layout prints
// the same tokens with the same draft and accepted counts only when rank 0's drafter observes
// each step's right rows (captured by rank 0 with one stage, sent from the last stage's TP rank 0
// under --pp, over the replica link under --dp, over the return link under virtual engines) and
// the ranks running the head get them back with each pass. Rows shifted by one or zeroed change the
// counts. The target's and head's output projections are zero, so the rows are exact under every
// layout and the counts must match exactly.
TEST_F(HybridSpeculativeCli, MtpUnderRankProcessesTheHeadReadsTheRightHiddenRows) {
  const std::string base = "--model " + model("tiny-hybrid-oracle-hidden") + " --kv-cache-memory 16MiB --max-model-len 256 "
                           "--prompt 'the quick brown fox' --prompt 'one two three four five' "
                           "--generate-config '{\"max_tokens\": 24, \"temperature\": 0}'";
  const std::string mtp = " --speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 3, "
                          "\"cost_model\": false}'";
  const RunResult plain = run(base);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_FALSE(printed_token_ids(plain.output).empty()) << plain.output;
  const RunResult one = run(base + mtp);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_EQ(printed_token_ids(one.output), printed_token_ids(plain.output)) << one.output;
  const auto s1 = speculative_line(one.output);
  ASSERT_TRUE(s1) << one.output;
  // The hidden half moves some drafts off the target's token (the plain oracle accepts them all).
  ASSERT_GT(s1->accepted, 0) << one.output;
  ASSERT_LT(s1->accepted, s1->draft_tokens) << "the hidden rows change no draft: " << one.output;
  const std::string mpirun = pypto::test::mpirun_prefix();
  struct Layout {
    std::string launcher, args;
  };
  const Layout layouts[] = {
      {"", " --tp 2 --devices 0,1 --distributed-executor-backend mp"},
      {"", " --pp 2 --devices 0,1 --distributed-executor-backend mp"},
      {"", " --pp 2 --tp 2 --devices 0,1,2,3 --cpu-oversubscribe --distributed-executor-backend mp"},
      {"", " --dp 2 --devices 0,1 --distributed-executor-backend mp"},
      {"", " --dp 2 --pp 2 --devices 0,1,2,3 --cpu-oversubscribe --distributed-executor-backend mp"},
      {"", " --pp 2 --pp-virtual-engines --devices 0,1 --distributed-executor-backend mp"},
      {mpirun + "-np 2 ", " --tp 2 --distributed-executor-backend mpi"},
      {mpirun + "-np 2 ", " --pp 2 --distributed-executor-backend mpi"},
      {mpirun + "-np 4 ", " --dp 2 --pp 2 --distributed-executor-backend mpi"},
  };
  bool skipped_mpi = false;
  for (const Layout& l : layouts) {
    if (has(l.args, "mpi") && mpirun.empty()) {
      skipped_mpi = true;
      continue;
    }
    const std::string what = "oracle-hidden" + l.args;
    const RunResult r = pypto::test::run_shell(l.launcher + pypto::test::kBinary + " " + base + mtp + l.args);
    ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.output;
    EXPECT_TRUE(has(r.output, "MTP drafter's passes on the")) << what << "\n" << r.output;
    EXPECT_EQ(printed_token_ids(r.output), printed_token_ids(plain.output)) << what << "\n" << r.output;
    const auto s2 = speculative_line(r.output);
    ASSERT_TRUE(s2) << what << "\n" << r.output;
    expect_same_counts(*s2, *s1, what);
  }
  if (skipped_mpi) GTEST_SKIP() << "the mpi layouts: " << pypto::test::kNoMpi;
}

TEST_F(HybridSpeculativeCli, MtpIsRefusedWithoutAHead) {
  const std::string rest = " --kv-cache-memory 16MiB --max-model-len 256 --prompt hi --speculative-config "
                           "'{\"method\": \"mtp\", \"num_speculative_tokens\": 2}'";
  RunResult r = run("--model " + model("tiny") + rest);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "has none: use method ngram or draft_model")) << r.output;
  r = run("--model " + model("tiny-hybrid-oracle") + " --kv-cache-memory 16MiB --max-model-len 256 --prompt hi "
          "--speculative-config '{\"method\": \"mtp\", \"num_speculative_tokens\": 2, \"model\": \"x\"}'");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "'model' does not apply to method mtp")) << r.output;
}

}  // namespace
