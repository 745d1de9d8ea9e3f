// Pipeline parallelism (--pp) through the real binary, on a tiny random-weight model with 4
// layers and on the qwen3-0.6b shape with 4 of its 28 layers:
//  - greedy ids of --pp 2 (threads, mp processes, mpirun) and of --tp 2 --pp 2 (4 ranks under
//    mpirun) are identical to one rank's, in offline mode, with 1 and several micro-batches
//    (--pp-micro-batch-tokens 1 lets these short steps split);
//  - the served top-5 logprobs of --pp 2 (mp, mpirun) are within 1e-5 of one rank's at the exact
//    f32 precision;
//  - killing the last stage's rank mid-generation (mp, mpirun) turns /health to 503 and the server
//    exits naming it within 10 s, no process left;
//  - --pp-virtual-engines (two engines' steps in flight together, step_pipeline.h): greedy ids of
//    --pp 2, --pp 4 and --tp 2 --pp 2 (mp, mpirun), --pp 2 and --dp 2 --tp 2 --pp 2 (threads) and
//    served logprobs (mp) equal one rank's; a killed stage rank ends the server within 10 s;
//  - bad --pp / --pp-micro-batches / --pp-virtual-engines values are refused naming the flag, the
//    value and the limit.
// The reference is the single-rank engine (itself checked against PyTorch in tests/model).
#include <gtest/gtest.h>

#include <unistd.h>

#include "model/test_model.h"
#include "process_harness.h"
#include "served_checks.h"

namespace pypto::test {
namespace {

constexpr const char* kCommon = kRankCommon;

class PipelineRanks : public ::testing::Test {
 protected:
  static fs::path dir_;
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("pypto_pipeline_ranks_" + std::to_string(getpid()));
    TestModelOptions o;
    o.out_dir = (dir_ / "tiny").string();
    o.layers = 4;  // two per stage at --pp 2
    o.show_progress = false;
    make_test_model(o);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string model() { return (dir_ / "tiny").string(); }

  std::vector<std::vector<int>> offline_ids(const std::string& prefix, const std::string& args,
                                            const std::string& model_dir = model()) {
    return test::offline_ids(dir_, model_dir, prefix, args);
  }
};
fs::path PipelineRanks::dir_;

TEST_F(PipelineRanks, OfflineGreedyIdsOfTwoStagesEqualOneRank) {
  const auto one = offline_ids("", "");
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(offline_ids("", "--pp 2 --devices 0,1 --distributed-executor-backend threads"), one) << "threads";
  EXPECT_EQ(offline_ids("", "--pp 2 --devices 0,1 --pp-micro-batches 1"), one) << "mp, 1 micro-batch";
  EXPECT_EQ(offline_ids("", "--pp 2 --devices 0,1 --pp-micro-batches 3 --pp-micro-batch-tokens 1"), one)
      << "mp, 3 micro-batches";
  if (mpirun_prefix().empty()) GTEST_SKIP() << "mpi part: " << kNoMpi;
  EXPECT_EQ(offline_ids(mpirun_prefix() + "-np 2 ", "--pp 2 --pp-micro-batch-tokens 1 --distributed-executor-backend mpi"),
            one)
      << "mpi, 4 micro-batches (as many as sequences: 3)";
  // 4 ranks: two stages of two tensor-parallel ranks (more ranks than cores: fine for correctness).
  EXPECT_EQ(offline_ids(mpirun_prefix() + "-np 4 ",
                        "--tp 2 --pp 2 --pp-micro-batch-tokens 1 --distributed-executor-backend mpi"),
            one)
      << "mpi --tp 2 --pp 2";
}

// --pp-virtual-engines: two engines' steps in flight together through the stages (each engine
// holds its own sequences; the 3 prompts are spread over both), greedy ids still one rank's.
TEST_F(PipelineRanks, OfflineGreedyIdsOfVirtualEnginesEqualOneRank) {
  const auto one = offline_ids("", "");
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(offline_ids("", "--pp 2 --devices 0,1 --pp-virtual-engines"), one) << "mp";
  EXPECT_EQ(offline_ids("", "--tp 2 --pp 2 --devices 0,1,2,3 --cpu-oversubscribe --pp-virtual-engines"), one)
      << "mp --tp 2 --pp 2";
  EXPECT_EQ(offline_ids("", "--pp 4 --devices 0,1,2,3 --cpu-oversubscribe --pp-virtual-engines"), one) << "mp --pp 4";
  EXPECT_EQ(offline_ids("", "--pp 2 --devices 0,1 --distributed-executor-backend threads --pp-virtual-engines"), one)
      << "threads";
  EXPECT_EQ(offline_ids("", "--dp 2 --tp 2 --pp 2 --devices 0,1,2,3,4,5,6,7 --cpu-oversubscribe"
                            " --distributed-executor-backend threads --pp-virtual-engines"),
            one)
      << "threads --dp 2 --tp 2 --pp 2 (4 engines)";
  if (mpirun_prefix().empty()) GTEST_SKIP() << "mpi part: " << kNoMpi;
  EXPECT_EQ(offline_ids(mpirun_prefix() + "-np 2 ", "--pp 2 --pp-virtual-engines --distributed-executor-backend mpi"),
            one)
      << "mpi";
  EXPECT_EQ(offline_ids(mpirun_prefix() + "-np 4 ",
                        "--tp 2 --pp 2 --pp-virtual-engines --distributed-executor-backend mpi"),
            one)
      << "mpi --tp 2 --pp 2";
}

TEST_F(PipelineRanks, Qwen3_0_6B_ShapeGreedyIdsOfTwoStagesEqualOneRank) {
  TestModelOptions o;
  o.preset = "qwen3-0.6b";
  o.layers = 4;
  o.out_dir = (dir_ / "q06").string();
  o.show_progress = false;
  make_test_model(o);
  const auto one = offline_ids("", "", o.out_dir);
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(offline_ids("", "--pp 2 --devices 0,1", o.out_dir), one) << "mp";
  if (!mpirun_prefix().empty())
    EXPECT_EQ(offline_ids(mpirun_prefix() + "-np 2 ", "--pp 2 --distributed-executor-backend mpi", o.out_dir), one)
        << "mpi";
  fs::remove_all(o.out_dir);
}

TEST_F(PipelineRanks, ServedLogprobsOfTwoStagesAreWithin1e5OfOneRank) {
  // The exact f32 path: a stage boundary passes the f32 residual stream unchanged, so the only
  // differences come from the batch split into micro-batches (none expected beyond rounding).
  const std::string args = " --model " + model() + kCommon +
                           " --served-model-name tiny --matmul-precision highest --kv-cache-dtype fp32";
  const Served one = serve_and_ask(kBinary + args, dir_ / "one.log");
  ASSERT_EQ(one.tokens.size(), 3u);
  expect_served_match(one, serve_and_ask(kBinary + args + " --pp 2 --devices 0,1", dir_ / "mp.log"), "mp --pp 2");
  expect_served_match(one, serve_and_ask(kBinary + args + " --pp 2 --devices 0,1 --pp-virtual-engines", dir_ / "ve.log"),
                      "mp --pp 2 --pp-virtual-engines");
  if (mpirun_prefix().empty()) GTEST_SKIP() << "mpi part: " << kNoMpi;
  expect_served_match(one,
                      serve_and_ask(mpirun_prefix() + "-np 2 " + kBinary + args + " --pp 2 --distributed-executor-backend mpi",
                                    dir_ / "mpi.log"),
                      "mpi --pp 2");
}

TEST_F(PipelineRanks, KilledStageRankMakesServerUnhealthyAndExitWithin10s) {
  // Rank 1 is the last stage: rank 0 waits for its logits when it dies.
  check_fault(kBinary + " --model " + model() + kCommon + " --pp 2 --devices 0,1", dir_ / "kill.log", false, SIGKILL,
              "rank 1 (pipeline stage 1, tensor-parallel rank 0) (pid ");
}

TEST_F(PipelineRanks, KilledStageRankOfVirtualEnginesMakesServerUnhealthyAndExitWithin10s) {
  check_fault(kBinary + " --model " + model() + kCommon + " --pp 2 --devices 0,1 --pp-virtual-engines",
              dir_ / "vekill.log", false, SIGKILL, "rank 1 (pipeline stage 1, tensor-parallel rank 0) (pid ");
}

TEST_F(PipelineRanks, KilledMpiStageRankEndsTheJobWithin10s) {
  if (mpirun_prefix().empty()) GTEST_SKIP() << kNoMpi;
  check_fault(mpirun_prefix() + "-np 2 " + kBinary + " --model " + model() + kCommon +
                  " --pp 2 --distributed-executor-backend mpi",
              dir_ / "mpikill.log", true, SIGKILL, "rank 1");
}

TEST_F(PipelineRanks, BadValuesAreRefusedNamingFlagValueAndLimit) {
  RunResult r = run_shell(kBinary + " --model " + model() + kCommon + " --prompt hi --pp 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "--pp 0: expected a positive number of pipeline stages")) << r.output;
  // More stages than layers: a one-layer model cannot be split in two (the limit is the layer count).
  TestModelOptions o;
  o.out_dir = (dir_ / "one_layer").string();
  o.layers = 1;
  o.show_progress = false;
  make_test_model(o);
  for (const char* backend : {"threads", "mp"}) {
    r = run_shell(kBinary + " --model " + o.out_dir + kCommon + " --prompt hi --pp 2 --devices 0,1" +
                  " --distributed-executor-backend " + backend);
    EXPECT_NE(r.exit_code, 0) << backend;
    EXPECT_TRUE(has(r.output, "--pp 2: the model has 1 decoder layers")) << backend << ": " << r.output;
    EXPECT_TRUE(has(r.output, "use --pp between 1 and 1")) << backend << ": " << r.output;
  }
  r = run_shell(kBinary + " --model " + model() + kCommon + " --prompt hi --pp 2 --devices 0,1 --pp-micro-batches 0");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "--pp-micro-batches 0: expected a number of micro-batches between 1 and 1024")) << r.output;
  r = run_shell(kBinary + " --model " + model() + kCommon + " --prompt hi --pp-virtual-engines");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "--pp-virtual-engines runs --pp engines over the pipeline stages of a replica: it needs "
                            "--pp >= 2 (got --pp 1)"))
      << r.output;
  r = run_shell(kBinary + " --model " + model() + kCommon +
                " --prompt hi --dp 2 --pp 2 --devices 0,1,2,3 --cpu-oversubscribe --distributed-executor-backend mp"
                " --pp-virtual-engines");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "--pp-virtual-engines with --dp 2 needs --distributed-executor-backend threads")) << r.output;
  // 6 MiB of the tiny model's KV = 384 blocks of 16 tokens; a 4096-token sequence needs 256, more
  // than each engine's half.
  r = run_shell(kBinary + " --model " + model() +
                " --threads 1 --kv-cache-memory 6MiB --max-model-len 4096 --prompt hi --pp 2 --devices 0,1 --pp-virtual-engines");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "--pp-virtual-engines: each of the 2 engines gets 192 of the 384 KV blocks, fewer than one "
                            "--max-model-len 4096 sequence needs (256)"))
      << r.output;
  r = run_shell(kBinary + " --model " + model() + kCommon + " --prompt hi --pp 2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "--dp 1 x --pp 2 x --tp 1 needs 2 devices")) << r.output;
  if (mpirun_prefix().empty()) GTEST_SKIP() << "mpi part: " << kNoMpi;
  r = run_shell(mpirun_prefix() + "-np 2 " + kBinary + " --model " + model() +
                " --prompt hi --tp 2 --pp 2 --distributed-executor-backend mpi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "mpirun started 2 processes but --pp 2 x --tp 2 is 4 ranks")) << r.output;
}

}  // namespace
}  // namespace pypto::test
