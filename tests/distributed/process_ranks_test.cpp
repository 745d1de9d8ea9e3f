// Tensor-parallel ranks as processes, through the real binary on a tiny random-weight model:
//  - greedy ids of --tp 2 with ranks as processes (mp: forked ranks over shared memory; mpi: two
//    processes started by mpirun, TCP over loopback) are identical to one rank's, in offline mode
//    and over HTTP, and the served top-5 logprobs are within 1e-5 of one rank's;
//  - a rank that is killed or stops (frozen by ptrace) mid-generation turns /health to 503 and the server
//    exits with status 1 naming the rank within 10 s, leaving no process behind;
//  - a rank that cannot load fails the start naming the rank, its host and the reason; SIGTERM to
//    every rank is a clean stop, not a fault;
//  - misuse (mpi without mpirun, a process count that is not --tp, --dp with process ranks) is
//    refused with a message saying what to do.
// The reference is the single-rank engine (itself checked against PyTorch in tests/model).
#include <gtest/gtest.h>

#include <cmath>
#include <unistd.h>

#include "model/test_model.h"
#include "process_harness.h"

namespace fs = std::filesystem;

namespace pypto::test {
namespace {

constexpr const char* kCommon = " --threads 1 --kv-cache-memory 64MiB --max-model-len 4096";

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

  // Offline generation: the --output-json results' token ids, one vector per prompt.
  std::vector<std::vector<int>> offline_ids(const std::string& prefix, const std::string& args,
                                            const std::string& model_dir = model()) {
    const std::string json_path = (dir_ / "out.json").string();
    fs::remove(json_path);
    const RunResult r = run_shell(prefix + kBinary + " --model " + model_dir + kCommon +
                                  " --prompt-token-ids 1,2,3,4,5 --prompt-token-ids 9,8,7 --prompt-token-ids 42"
                                  " --generate-config '{\"max_new_tokens\": 24, \"temperature\": 0}' --output-json " +
                                  json_path + " " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::vector<std::vector<int>> ids;
    if (r.exit_code != 0) return ids;
    const auto j = nlohmann::json::parse(read_file(json_path));
    for (const auto& res : j["results"]) ids.push_back(res["token_ids"].get<std::vector<int>>());
    return ids;
  }
};
fs::path ProcessRanks::dir_;

// The served completions' tokens and top-5 logprobs for a few prompts.
struct Served {
  std::vector<std::vector<std::string>> tokens;
  std::vector<std::vector<std::map<std::string, double>>> top;
};

Served serve_and_ask(const std::string& command, const fs::path& log) {
  Served s;
  ServerProcess server(command, log);
  const int port = server.wait_port(120);
  EXPECT_GT(port, 0) << server.log();
  if (port == 0) return s;
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(120);
  for (const char* prompt : {"[1,2,3,4,5]", "[9,8,7]", "\"the quick brown fox\""}) {
    const std::string body = std::string("{\"model\":\"tiny\",\"prompt\":") + prompt +
                             ",\"max_tokens\":12,\"temperature\":0,\"logprobs\":5}";
    auto res = cli.Post("/v1/completions", body, "application/json");
    EXPECT_TRUE(res && res->status == 200) << (res ? res->body : "no response") << server.log();
    if (!res || res->status != 200) return s;
    const auto lp = nlohmann::json::parse(res->body)["choices"][0]["logprobs"];
    s.tokens.push_back(lp["tokens"].get<std::vector<std::string>>());
    std::vector<std::map<std::string, double>> top;
    for (const auto& t : lp["top_logprobs"]) top.push_back(t.get<std::map<std::string, double>>());
    s.top.push_back(top);
  }
  return s;
}

void expect_served_match(const Served& want, const Served& got, const std::string& what) {
  ASSERT_EQ(got.tokens, want.tokens) << what;
  double worst = 0;
  for (size_t p = 0; p < want.top.size(); ++p)
    for (size_t i = 0; i < want.top[p].size(); ++i) {
      ASSERT_EQ(got.top[p][i].size(), want.top[p][i].size()) << what;
      for (const auto& [tok, lp] : want.top[p][i]) {
        ASSERT_TRUE(got.top[p][i].count(tok)) << what << ": prompt " << p << " step " << i << " lacks '" << tok << "'";
        worst = std::max(worst, std::fabs(got.top[p][i].at(tok) - lp));
      }
    }
  std::printf("[logprobs] %s: max |top-5 logprob - one rank's| = %.3g\n", what.c_str(), worst);
  EXPECT_LE(worst, 1e-5) << what << ": the top-5 logprobs differ from one rank's by up to " << worst;
}

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

// Starts a --tp 2 server, starts a long generation, sends rank 1 `signal` (SIGSTOP: freezes it
// with ptrace instead, see PtraceFreeze) and checks that /health turns 503 and the server exits
// naming the fault within 10 s, no rank left.
void check_fault(const std::string& command, const fs::path& log, bool mpi, int signal, const std::string& says) {
  ServerProcess server(command, log);
  const int port = server.wait_port(120);
  ASSERT_GT(port, 0) << server.log();
  // Rank 1: mp: the server's child; mpi: the process under mpirun whose environment says rank 1.
  pid_t rank1 = -1;
  std::vector<pid_t> ranks = mpi ? descendants_of(server.pid()) : children_of(server.pid());
  for (pid_t p : ranks) {
    if (!mpi) {
      rank1 = p;
      break;
    }
    if (has(read_file("/proc/" + std::to_string(p) + "/environ"), std::string("OMPI_COMM_WORLD_RANK=1") + '\0'))
      rank1 = p;
  }
  ASSERT_GT(rank1, 0) << "no rank-1 process among the server's children";

  std::thread client([port] {
    httplib::Client cli("127.0.0.1", port);
    cli.set_read_timeout(60);
    cli.Post("/v1/completions", R"({"model":"tiny","prompt":"hello","max_tokens":4000,"ignore_eos":true})",
             "application/json");
  });
  httplib::Client health("127.0.0.1", port);
  health.set_connection_timeout(1);
  health.set_read_timeout(1);
  auto h = health.Get("/health");
  ASSERT_TRUE(h && h->status == 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // generating now
  std::unique_ptr<PtraceFreeze> freeze;
  if (signal == SIGSTOP) {
    freeze = std::make_unique<PtraceFreeze>(rank1, 20.0);  // SIGSTOP that no SIGCONT undoes
    if (!freeze->frozen())
      GTEST_SKIP() << "cannot ptrace rank 1 here (kernel.yama.ptrace_scope, or no CAP_SYS_PTRACE): "
                      "the hang cannot be simulated";
  } else {
    ASSERT_EQ(::kill(rank1, signal), 0);
  }
  const auto t0 = std::chrono::steady_clock::now();
  bool saw_503 = false;
  while (!server.exited() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(12)) {
    auto r = health.Get("/health");
    if (r && r->status == 503) saw_503 = true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  client.join();
  std::printf("[fault] %s: the server exited %.2f s after the fault\n", says.c_str(), secs);
  ASSERT_TRUE(server.exited()) << "still running " << secs << " s after the fault\n" << server.log();
  EXPECT_LE(secs, 10.0) << server.log();
  EXPECT_NE(server.exit_code(), 0) << server.log();
  // mp: rank 0's monitor turns /health to 503 for 2 s before exiting; mpi: mpirun sends rank 0
  // SIGTERM (the server drains: 503) and SIGKILL 1 s later.
  EXPECT_TRUE(saw_503) << "/health never reported the dead rank\n" << server.log();
  if (!mpi) EXPECT_EQ(server.exit_code(), 1);
  EXPECT_TRUE(has(server.log(), says)) << server.log();
  // Every rank is gone within the same 10 s (mpirun may return while it still kills rank 0).
  for (pid_t p : ranks) {
    while (process_running(p) && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(process_running(p)) << "rank process " << p << " outlived the server by 10 s";
  }
}

TEST_F(ProcessRanks, KilledMpRankMakesServerUnhealthyAndExitWithin10s) {
  check_fault(kBinary + " --model " + model() + kCommon + " --tp 2 --devices 0,1", dir_ / "kill.log", false, SIGKILL,
              "tensor-parallel rank 1 (pid ");
}

TEST_F(ProcessRanks, StoppedMpRankIsDetectedAsHungWithin10s) {
  check_fault(kBinary + " --model " + model() + kCommon + " --tp 2 --devices 0,1", dir_ / "stop.log", false, SIGSTOP,
              "stopped answering (no heartbeat for 5 s)");
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
  r = run_shell(kBinary + " --model " + model() + " --prompt hi --tp 2 --dp 2 --devices 0,1,2,3 --distributed-executor-backend mp");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(has(r.output, "with --dp 2 use --distributed-executor-backend threads")) << r.output;
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
