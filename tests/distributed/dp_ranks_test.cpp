// Data parallelism (--dp) with ranks as processes, through the real binary on a tiny random-weight
// model (4 layers, 2 KV heads: --tp 2 and --pp 2 both split it):
//  - offline greedy ids of 3 prompts with --dp 2 (--tp 1: 2 processes), --dp 2 --tp 2 and
//    --dp 2 --pp 2 (4 processes) under mp and under mpirun, and --dp 2 --pp 2 under threads, are
//    identical to one rank's, and the prompts were spread over both replicas;
//  - served: --dp 2 --tp 2 (mp, mpirun) answers like one rank (tokens and top-5 logprobs at the
//    exact f32 precision) and /metrics shows that both replicas generated;
//  - killing a rank of replica 1 mid-generation turns /health to 503 and the server exits naming
//    it within 10 s, no process left.
// Devices outnumber this machine's cores, so the runs pass --cpu-oversubscribe (mp, threads) or
// rely on mpirun's oversubscription: fine for correctness. The reference is the single-rank
// engine (itself checked against PyTorch in tests/model).
#include <gtest/gtest.h>

#include <unistd.h>

#include "model/test_model.h"
#include "process_harness.h"
#include "served_checks.h"

namespace pypto::test {
namespace {

constexpr const char* kCommon = kRankCommon;
constexpr const char* kFour = " --devices 0,1,2,3 --cpu-oversubscribe";

class DpRanks : public ::testing::Test {
 protected:
  static fs::path dir_;
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("pypto_dp_ranks_" + std::to_string(getpid()));
    TestModelOptions o;
    o.out_dir = (dir_ / "tiny").string();
    o.layers = 4;  // two per stage at --pp 2
    o.show_progress = false;
    make_test_model(o);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string model() { return (dir_ / "tiny").string(); }

  struct Offline {
    std::vector<std::vector<int>> ids;
    std::string output;
  };
  // offline_ids() plus the run's output (the per-replica spread lines).
  Offline offline(const std::string& prefix, const std::string& args) {
    const std::string json_path = (dir_ / "out.json").string();
    fs::remove(json_path);
    Offline o;
    const RunResult r = run_shell(prefix + kBinary + " --model " + model() + kCommon +
                                  " --prompt-token-ids 1,2,3,4,5 --prompt-token-ids 9,8,7 --prompt-token-ids 42"
                                  " --generate-config '{\"max_new_tokens\": 24, \"temperature\": 0}' --output-json " +
                                  json_path + " " + args);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    o.output = r.output;
    if (r.exit_code != 0) return o;
    const auto j = nlohmann::json::parse(read_file(json_path));
    for (const auto& res : j["results"]) o.ids.push_back(res["token_ids"].get<std::vector<int>>());
    return o;
  }
  // Greedy ids equal to one rank's, and both replicas were given prompts.
  void expect_like_one(const std::vector<std::vector<int>>& one, const std::string& prefix, const std::string& args) {
    const Offline got = offline(prefix, args);
    EXPECT_EQ(got.ids, one) << args;
    const std::regex spread(R"(\[replica (\d)\] (\d+) request\(s\))");
    int replicas_used = 0;
    for (auto it = std::sregex_iterator(got.output.begin(), got.output.end(), spread); it != std::sregex_iterator(); ++it)
      if (std::stoi((*it)[2].str()) > 0) ++replicas_used;
    EXPECT_EQ(replicas_used, 2) << args << ": the prompts did not go to both replicas\n" << got.output;
  }
};
fs::path DpRanks::dir_;

TEST_F(DpRanks, OfflineGreedyIdsOfProcessReplicasEqualOneRank) {
  const auto one = offline("", "").ids;
  ASSERT_EQ(one.size(), 3u);
  expect_like_one(one, "", "--dp 2 --devices 0,1 --distributed-executor-backend mp");
  expect_like_one(one, "", std::string("--dp 2 --tp 2 --distributed-executor-backend mp") + kFour);
  expect_like_one(one, "", std::string("--dp 2 --pp 2 --pp-micro-batch-tokens 1 --distributed-executor-backend mp") + kFour);
  expect_like_one(one, "", std::string("--dp 2 --pp 2 --pp-micro-batch-tokens 1 --distributed-executor-backend threads") + kFour);
  if (mpirun_prefix().empty()) GTEST_SKIP() << "mpi part: " << kNoMpi;
  expect_like_one(one, mpirun_prefix() + "-np 2 ", "--dp 2 --distributed-executor-backend mpi");
  expect_like_one(one, mpirun_prefix() + "-np 4 ", "--dp 2 --tp 2 --distributed-executor-backend mpi");
  expect_like_one(one, mpirun_prefix() + "-np 4 ", "--dp 2 --pp 2 --pp-micro-batch-tokens 1 --distributed-executor-backend mpi");
}

// Generated tokens per engine from /metrics (vllm:generation_tokens_total{...,engine="i"}).
std::map<int, long> generated_per_engine(const std::string& metrics) {
  std::map<int, long> out;
  const std::regex re(R"re(vllm:generation_tokens_total\{[^}]*engine="(\d+)"\} (\d+))re");
  for (auto it = std::sregex_iterator(metrics.begin(), metrics.end(), re); it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1].str())] = std::stol((*it)[2].str());
  return out;
}

// A server of one rank and one of --dp 2 --tp 2 (4 processes) answer the same prompts alike;
// requests alternate between the idle replicas (least pending tokens, ties rotate), so both serve.
void expect_served_over_both(const Served& one, const std::string& dp_cmd, const fs::path& dir, const std::string& what,
                             const std::string& log_name) {
  ServerProcess server(dp_cmd, dir / log_name);
  const int port = server.wait_port(120);
  ASSERT_GT(port, 0) << server.log();
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(120);
  Served got;
  for (const char* prompt : {"[1,2,3,4,5]", "[9,8,7]", "\"the quick brown fox\""}) {
    const std::string body = std::string("{\"model\":\"tiny\",\"prompt\":") + prompt +
                             ",\"max_tokens\":12,\"temperature\":0,\"logprobs\":5}";
    auto res = cli.Post("/v1/completions", body, "application/json");
    ASSERT_TRUE(res && res->status == 200) << (res ? res->body : "no response") << server.log();
    const auto lp = nlohmann::json::parse(res->body)["choices"][0]["logprobs"];
    got.tokens.push_back(lp["tokens"].get<std::vector<std::string>>());
    std::vector<std::map<std::string, double>> top;
    for (const auto& t : lp["top_logprobs"]) top.push_back(t.get<std::map<std::string, double>>());
    got.top.push_back(top);
  }
  expect_served_match(one, got, what);
  auto m = cli.Get("/metrics");
  ASSERT_TRUE(m && m->status == 200);
  const auto per_engine = generated_per_engine(m->body);
  ASSERT_EQ(per_engine.size(), 2u) << m->body;
  EXPECT_GT(per_engine.at(0), 0) << "replica 0 generated nothing\n" << m->body;
  EXPECT_GT(per_engine.at(1), 0) << "replica 1 generated nothing\n" << m->body;
  EXPECT_EQ(per_engine.at(0) + per_engine.at(1), 36) << m->body;  // 3 requests of 12 tokens
}

TEST_F(DpRanks, ServedByBothProcessReplicasLikeOneRank) {
  const std::string args = " --model " + model() + kCommon +
                           " --served-model-name tiny --matmul-precision highest --kv-cache-dtype fp32";
  const Served one = serve_and_ask(kBinary + args, dir_ / "one.log");
  ASSERT_EQ(one.tokens.size(), 3u);
  expect_served_over_both(one, kBinary + args + " --dp 2 --tp 2 --distributed-executor-backend mp" + kFour, dir_,
                          "mp --dp 2 --tp 2", "mp.log");
  if (mpirun_prefix().empty()) GTEST_SKIP() << "mpi part: " << kNoMpi;
  expect_served_over_both(one,
                          mpirun_prefix() + "-np 4 " + kBinary + args + " --dp 2 --tp 2 --distributed-executor-backend mpi",
                          dir_, "mpi --dp 2 --tp 2", "mpi.log");
}

TEST_F(DpRanks, KilledRankOfSecondReplicaMakesServerUnhealthyAndExitWithin10s) {
  // --dp 2, one rank per replica: rank 1 is replica 1's only rank (check_fault kills the server's
  // first child, rank 1).
  check_fault(kBinary + " --model " + model() + kCommon + " --dp 2 --devices 0,1 --distributed-executor-backend mp",
              dir_ / "kill.log", false, SIGKILL, "rank 1 (replica 1, tensor-parallel rank 0) (pid ");
}

TEST_F(DpRanks, KilledMpiRankOfSecondReplicaEndsTheJobWithin10s) {
  if (mpirun_prefix().empty()) GTEST_SKIP() << kNoMpi;
  check_fault(mpirun_prefix() + "-np 2 " + kBinary + " --model " + model() + kCommon +
                  " --dp 2 --distributed-executor-backend mpi",
              dir_ / "mpikill.log", true, SIGKILL, "rank 1");
}

TEST_F(DpRanks, ProcessCountMustBeDpTimesPpTimesTp) {
  if (mpirun_prefix().empty()) GTEST_SKIP() << kNoMpi;
  const RunResult r = run_shell(mpirun_prefix() + "-np 2 " + kBinary + " --model " + model() +
                                " --prompt hi --dp 2 --tp 2 --distributed-executor-backend mpi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(has(r.output, "mpirun started 2 processes but --dp 2 x --tp 2 is 4 ranks")) << r.output;
}

}  // namespace
}  // namespace pypto::test
