// --speculative-config method eagle3 through the real binary under --tp 2, --pp 2 and --pp 2
// --tp 2 (thread ranks, parallel/replicas/eagle3_tp_executor.h) on the tiny target cut to 4
// layers: with the oracle head every greedy draft is accepted and the tokens are those of a run
// without speculation; with a random head (rejections) the tokens are unchanged, the draft and
// accepted counts are the one-rank run's, and a seeded sampled run (rejection sampling against the
// head's distributions, which depend on the aux rows) prints the one-rank run's tokens (under --tp
// those of the --tp 2 thread ranks: the all-reduce's rounding moves near-flat distributions); and so under --pp-virtual-engines (the two prompts on
// the two engines; with --tp 2 for the random head, which has its own embed_tokens), and under
// --tp 2 rank processes (mp, and mpi under mpirun: the aux rows captured on rank 0, the oracle's
// embedding lookups sent to the other rank, parallel/replicas/eagle3_rank_pass.h). --pp with rank
// processes, and --pp-virtual-engines --tp 2 with a head reading the target's embedding, are
// refused naming the option. (tests/parallel/eagle3_tp_engine_test.cpp compares the drafts.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli_test_models.h"
#include "run_binary.h"

namespace {

using namespace pypto::test;

class Eagle3ParallelCli : public CliTestModels<Eagle3ParallelCli> {
 protected:
  static void SetUpTestSuite() {
    start_models("pypto_eagle3_parallel_cli_");
    for (const char* kind : {"oracle", "random"}) {
      pypto::TestModelOptions o;
      o.preset = "tiny";
      o.layers = 4;
      o.eagle3 = kind;
      make_model(kind, o);
    }
  }
  static std::string model(const char* kind) { return model_path(kind); }
  static std::string eagle3(const char* kind) {
    return " --speculative-config '{\"method\": \"eagle3\", \"model\": \"" + model(kind) +
           "/eagle3\", \"num_speculative_tokens\": 3, \"cost_model\": false}'";
  }
};

const std::string kInputs = " --kv-cache-memory 16MiB --max-model-len 256 --prompt 'the quick brown fox' "
                            "--prompt 'one two three four five'";
const std::string kPrompts = kInputs + " --generate-config '{\"max_tokens\": 16, \"temperature\": 0}'";
const std::string kSampled = kInputs + " --generate-config '{\"max_tokens\": 16, \"temperature\": 0.8, \"seed\": 7}'";

TEST_F(Eagle3ParallelCli, UnderTensorAndPipelineParallelRanksOutputAndCountsMatchOneRank) {
  const std::vector<std::string> layouts = {" --tp 2 --devices 0,1", " --pp 2 --devices 0,1",
                                            " --pp 2 --tp 2 --devices 0,1,2,3 --cpu-oversubscribe",
                                            " --pp 2 --pp-virtual-engines --devices 0,1",
                                            " --pp 2 --tp 2 --pp-virtual-engines --devices 0,1,2,3 --cpu-oversubscribe",
                                            " --tp 2 --devices 0,1 --distributed-executor-backend mp",
                                            " --tp 2 --distributed-executor-backend mpi"};
  const std::string mpirun = mpirun_prefix();
  bool skipped_mpi = false;
  for (const char* kind : {"oracle", "random"}) {
    const bool oracle = std::string(kind) == "oracle";
    const std::string base = "--model " + model(kind) + kPrompts;
    const RunResult plain = run(base);
    ASSERT_EQ(plain.exit_code, 0) << plain.output;
    ASSERT_FALSE(printed_token_ids(plain.output).empty()) << plain.output;
    const RunResult one = run(base + eagle3(kind));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    EXPECT_EQ(printed_token_ids(one.output), printed_token_ids(plain.output)) << kind << "\n" << one.output;
    const auto s1 = speculative_line(one.output);
    ASSERT_TRUE(s1) << one.output;
    const RunResult sampled = run("--model " + model(kind) + kSampled + eagle3(kind));
    ASSERT_EQ(sampled.exit_code, 0) << sampled.output;
    const RunResult sampled_tp = run("--model " + model(kind) + kSampled + eagle3(kind) + layouts[0]);
    ASSERT_EQ(sampled_tp.exit_code, 0) << sampled_tp.output;
    for (const std::string& layout : layouts) {
      const bool virtual_engines = has(layout, "--pp-virtual-engines");
      if (oracle && virtual_engines && has(layout, "--tp 2")) continue;  // refused (below)
      const bool mpi = has(layout, "backend mpi"), processes = mpi || has(layout, "backend mp");
      if (mpi && mpirun.empty()) {
        skipped_mpi = true;
        continue;
      }
      const std::string what = kind + layout;
      const RunResult r = mpi ? run_shell(mpirun + "-np 2 " + kBinary + " " + base +
                                                       eagle3(kind) + layout)
                              : run(base + eagle3(kind) + layout);
      ASSERT_EQ(r.exit_code, 0) << what << "\n" << r.output;
      EXPECT_TRUE(has(r.output, processes         ? "process group of 2 ranks"
                                : virtual_engines ? "each engine's EAGLE-3 drafter on stage 0's rank 0"
                                                  : "replica 0: the EAGLE-3 drafter on rank 0"))
          << what << "\n" << r.output;
      EXPECT_EQ(printed_token_ids(r.output), printed_token_ids(plain.output)) << what << "\n" << r.output;
      const auto s2 = speculative_line(r.output);
      ASSERT_TRUE(s2) << what << "\n" << r.output;
      expect_same_counts(*s2, *s1, what);
      if (oracle) {
        EXPECT_EQ(s2->accepted, s2->draft_tokens) << what;
        continue;
      }
      EXPECT_LT(s2->accepted, s2->draft_tokens) << "a random head accepted every draft: " << what;
      const std::string sargs = "--model " + model(kind) + kSampled + eagle3(kind) + layout;
      const RunResult rs = mpi ? run_shell(mpirun + "-np 2 " + kBinary + " " + sargs) : run(sargs);
      ASSERT_EQ(rs.exit_code, 0) << what << " sampled\n" << rs.output;
      EXPECT_EQ(printed_token_ids(rs.output), printed_token_ids(has(layout, "--tp 2") ? sampled_tp.output : sampled.output))
          << what << " sampled\n" << rs.output;
    }
  }
  if (skipped_mpi) GTEST_SKIP() << "the mpi layouts: " << pypto::test::kNoMpi;
}

TEST_F(Eagle3ParallelCli, PipelineRankProcessesAndASplitEmbeddingUnderVirtualEnginesAreRefusedByName) {
  const std::string base = "--model " + model("oracle") + kPrompts + eagle3("oracle");
  RunResult r = run(base + " --pp 2 --tp 2 --pp-virtual-engines --devices 0,1,2,3 --cpu-oversubscribe");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "method eagle3 with --pp-virtual-engines and --tp 2 needs a head with its own "
                            "embed_tokens"))
      << r.output;
  r = run(base + " --pp 2 --devices 0,1 --distributed-executor-backend mp");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "method eagle3 with rank processes (--distributed-executor-backend mp / mpi) runs --tp "
                            "only; --pp > 1 is not supported with them"))
      << r.output;
}

}  // namespace
