// Tensor-parallel ranks as processes, through the real binary on a tiny random-weight model:
//  - greedy ids of --tp 2 with ranks as processes (mp: forked ranks over shared memory; mpi: two
//    processes started by mpirun, TCP over loopback) are identical to one rank's, in offline mode
//    and over HTTP, and the served top-5 logprobs are within 1e-5 of one rank's;
//  - a rank that is killed or stops (frozen by ptrace) mid-generation turns /health to 503 and the server
//    exits with status 1 naming the rank within 10 s, leaving no process behind (mp: rank 0's
//    monitor; mpi: mpirun for a dead rank, the heartbeats of parallel/mpi_heartbeat.h for a frozen one);
//  - a rank that cannot load fails the start naming the rank, its host and the reason; SIGTERM to
//    every rank is a clean stop, not a fault;
//  - misuse (mpi without mpirun, a process count that is not --tp, --cpu-oversubscribe with --cpu-groups) is
//    refused with a message saying what to do.
// The reference is the single-rank engine (itself checked against PyTorch in tests/model).
#include <gtest/gtest.h>

#include <cmath>
#include <unistd.h>

#include "model/test_model.h"
#include "process_harness.h"
#include "served_checks.h"

namespace fs = std::filesystem;

namespace pypto::test {
namespace {

constexpr const char* kCommon = kRankCommon;

class ProcessRanks : public ::testing::Test {
 protected:
  static fs::path dir_;
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("pypto_process_ranks_" + std::to_string(getpid()));
    TestModelOptions o;
    o.out_dir = (dir_ / "tiny").string();  // 2 KV heads: --tp 2 splits them
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
fs::path ProcessRanks::dir_;

TEST_F(ProcessRanks, OfflineGreedyIdsOfProcessRanksEqualOneRank) {
  const auto one = offline_ids("", "");
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(offline_ids("", "--tp 2 --devices 0,1 --distributed-executor-backend threads"), one);
  EXPECT_EQ(offline_ids("", "--tp 2 --devices 0,1"), one) << "mp (the default for --tp 2)";
  if (mpirun_prefix().empty()) GTEST_SKIP() << "mpi part: " << kNoMpi;
  EXPECT_EQ(offline_ids(mpirun_prefix() + "-np 2 ", "--tp 2 --distributed-executor-backend mpi"), one);
}

// The qwen3-0.6b shape (hidden 1024, 16 query / 8 KV heads, vocabulary 151936 tied) with 2 of
// its 28 layers: real widths, so every collective moves real-sized vectors.
TEST_F(ProcessRanks, Qwen3_0_6B_ShapeGreedyIdsOfProcessRanksEqualOneRank) {
  TestModelOptions o;
  o.preset = "qwen3-0.6b";
  o.layers = 2;
  o.out_dir = (dir_ / "q06").string();
  o.show_progress = false;
  make_test_model(o);
  const auto one = offline_ids("", "", o.out_dir);
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(offline_ids("", "--tp 2 --devices 0,1", o.out_dir), one) << "mp";
  if (mpirun_prefix().empty()) GTEST_SKIP() << "mpi part: " << kNoMpi;
  EXPECT_EQ(offline_ids(mpirun_prefix() + "-np 2 ", "--tp 2 --distributed-executor-backend mpi", o.out_dir), one);
  fs::remove_all(o.out_dir);
}

TEST_F(ProcessRanks, ServedLogprobsOfProcessRanksAreWithin1e5OfOneRank) {
  // The exact f32 path (highest precision, fp32 KV): TP changes only the order of the o_proj /
  // down_proj partial sums, far below 1e-5. (At the default "high" precision activations are
  // rounded to bf16 per rank, and the greedy ids above are what is compared.)
  const std::string args = " --model " + model() + kCommon +
                           " --served-model-name tiny --matmul-precision highest --kv-cache-dtype fp32";
  const Served one = serve_and_ask(kBinary + args, dir_ / "one.log");
  ASSERT_EQ(one.tokens.size(), 3u);
  expect_served_match(one, serve_and_ask(kBinary + args + " --tp 2 --devices 0,1", dir_ / "mp.log"), "mp --tp 2");
  if (mpirun_prefix().empty()) GTEST_SKIP() << "mpi part: " << kNoMpi;
  expect_served_match(one,
                      serve_and_ask(mpirun_prefix() + "-np 2 " + kBinary + args + " --tp 2 --distributed-executor-backend mpi",
                                    dir_ / "mpi.log"),
                      "mpi --tp 2");
}

TEST_F(ProcessRanks, KilledMpRankMakesServerUnhealthyAndExitWithin10s) {
  check_fault(kBinary + " --model " + model() + kCommon + " --tp 2 --devices 0,1", dir_ / "kill.log", false, SIGKILL,
              "tensor-parallel rank 1 (pid ");
}

TEST_F(ProcessRanks, StoppedMpRankIsDetectedAsHungWithin10s) {
  check_fault(kBinary + " --model " + model() + kCommon + " --tp 2 --devices 0,1", dir_ / "stop.log", false, SIGSTOP,
              "stopped answering (no heartbeat for 5 s)");
}

TEST_F(ProcessRanks, StoppedMpiRankIsDetectedAsHungWithin10s) {
  if (mpirun_prefix().empty()) GTEST_SKIP() << kNoMpi;
  check_fault(mpirun_prefix() + "-np 2 " + kBinary + " --model " + model() + kCommon +
                  " --tp 2 --distributed-executor-backend mpi",
              dir_ / "mpistop.log", true, SIGSTOP, "rank 1 of the mpirun job stopped answering (no heartbeat for 5 s)");
}

TEST_F(ProcessRanks, KilledMpiRankEndsTheJobWithin10s) {
  if (mpirun_prefix().empty()) GTEST_SKIP() << kNoMpi;
  check_fault(mpirun_prefix() + "-np 2 " + kBinary + " --model " + model() + kCommon +
                  " --tp 2 --distributed-executor-backend mpi",
              dir_ / "mpikill.log", true, SIGKILL, "rank 1");
}

// A service manager's SIGTERM to every process (rank 0 and its children) is a clean stop: the
// other ranks ignore it, rank 0 drains, stops them and exits 0, and no fault is reported.
TEST_F(ProcessRanks, SigtermToEveryMpRankStopsTheServerCleanly) {
  ServerProcess server(kBinary + " --model " + model() + kCommon + " --tp 2 --devices 0,1", dir_ / "term.log");
  ASSERT_GT(server.wait_port(120), 0) << server.log();
  const std::vector<pid_t> ranks = children_of(server.pid());
  ASSERT_EQ(ranks.size(), 1u);
  ::kill(server.pid(), SIGTERM);
  ::kill(ranks[0], SIGTERM);
  ASSERT_TRUE(server.wait_exit(30)) << server.log();
  EXPECT_EQ(server.exit_code(), 0) << server.log();
  EXPECT_FALSE(has(server.log(), "tensor-parallel rank 1")) << server.log();
  EXPECT_FALSE(process_running(ranks[0]));
}

TEST_F(ProcessRanks, RankThatCannotLoadIsNamedWithHostAndReason) {
  if (mpirun_prefix().empty()) GTEST_SKIP() << kNoMpi;
  // MPMD: rank 1's host has no checkpoint at the path (each rank reads its own host's copy).
  const std::string missing = (dir_ / "not-here").string();
  const std::string tail = std::string(kCommon) + " --tp 2 --distributed-executor-backend mpi --prompt hi";
  const RunResult r = run_shell(mpirun_prefix() + "-np 1 " + kBinary + " --model " + model() + tail + " : -np 1 " +
                                kBinary + " --model " + missing + tail);
  EXPECT_NE(r.exit_code, 0) << r.output;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  EXPECT_TRUE(has(r.output, "the tensor-parallel ranks did not all load: rank 1 on " + std::string(host) + ": " + missing))
      << r.output;
}

TEST_F(ProcessRanks, MisuseIsRefusedWithWhatToDo) {
  RunResult r = run_shell(kBinary + " --model " + model() + " --prompt hi --tp 2 --distributed-executor-backend mpi");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.output, "start pypto-serving with mpirun, one process per rank (mpirun -np 2")) << r.output;
  r = run_shell(kBinary + " --model " + model() +
                " --prompt hi --tp 2 --dp 2 --devices 0,1,2,3 --cpu-oversubscribe --cpu-groups 0,1,0,1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.output, "--cpu-oversubscribe and --cpu-groups: give one of them")) << r.output;
  r = run_shell(kBinary + " --model " + model() + " --prompt hi --distributed-executor-backend ray");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "ray")) << r.output;
  if (mpirun_prefix().empty()) GTEST_SKIP() << "mpi part: " << kNoMpi;
  r = run_shell(mpirun_prefix() + "-np 2 " + kBinary + " --model " + model() + " --prompt hi --distributed-executor-backend mpi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "mpirun started 2 processes but --tp is 1")) << r.output;
}

}  // namespace
}  // namespace pypto::test
