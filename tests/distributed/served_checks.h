#pragma once
// Checks through the binary shared by the process-rank and pipeline tests: offline greedy ids of a
// few prompts, the served greedy tokens and top-5 logprobs (compared with one rank's), and a rank
// killed or frozen mid-generation (/health 503, exit within 10 s, no process left).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "process_harness.h"

namespace pypto::test {

namespace fs = std::filesystem;

// Options every run of these suites shares (one thread per rank: the ranks share 2 cores).
constexpr const char* kRankCommon = " --threads 1 --kv-cache-memory 64MiB --max-model-len 4096";

// Offline generation of 3 prompts (24 greedy tokens each, batched together) by `prefix` (e.g. an
// mpirun command) + the binary + `args`, the JSON written under `dir`: one id vector per prompt.
inline std::vector<std::vector<int>> offline_ids(const fs::path& dir, const std::string& model_dir,
                                                 const std::string& prefix, const std::string& args) {
  const std::string json_path = (dir / "out.json").string();
  fs::remove(json_path);
  const RunResult r = run_shell(prefix + kBinary + " --model " + model_dir + kRankCommon +
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

// The served completions' tokens and top-5 logprobs for a few prompts.
struct Served {
  std::vector<std::vector<std::string>> tokens;
  std::vector<std::vector<std::map<std::string, double>>> top;
};

inline Served serve_and_ask(const std::string& command, const fs::path& log) {
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

inline void expect_served_match(const Served& want, const Served& got, const std::string& what) {
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

// Starts a --tp 2 server, starts a long generation, sends rank 1 `signal` (SIGSTOP: freezes it
// with ptrace instead, see PtraceFreeze) and checks that /health turns 503 and the server exits
// naming the fault within 10 s, no rank left.
inline void check_fault(const std::string& command, const fs::path& log, bool mpi, int signal, const std::string& says) {
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
  // A failed assertion below returns early: stop the server first so the client's request ends,
  // then join it (a joinable std::thread destroyed would terminate the test binary).
  struct StopAndJoin {
    ServerProcess& server;
    std::thread& client;
    ~StopAndJoin() {
      if (!client.joinable()) return;
      server.stop();
      client.join();
    }
  } stop_and_join{server, client};
  httplib::Client health("127.0.0.1", port);
  health.set_connection_timeout(1);
  health.set_read_timeout(1);
  // Healthy while generating, before the fault. Under ctest -j2 with several ranks per core a
  // single 1 s request can time out, so it gets a few tries.
  int status = 0;
  for (int i = 0; i < 10 && status != 200; ++i)
    if (auto h = health.Get("/health")) status = h->status;
  ASSERT_EQ(status, 200) << "/health did not answer 200 before the fault\n" << server.log();
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

}  // namespace pypto::test
