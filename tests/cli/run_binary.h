#pragma once
// Runs the real pypto-serving binary for the CLI tests: its exit code and its stdout and stderr
// together; mpirun_prefix() runs it as an mpirun job (tests built with PYPTO_MPIEXEC); and the
// readers (and checks) of what an offline run prints.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <optional>
#include <regex>
#include <string>

namespace pypto::test {

inline const std::string kBinary = PYPTO_BINARY_DIR "/src/cli/pypto-serving";

struct RunResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

// "" when this build has no MPI; else an mpirun prefix that runs as root, over TCP on loopback,
// with more ranks than cores allowed, ended after 300 s if it hangs ("-np N" follows).
inline std::string mpirun_prefix() {
#ifdef PYPTO_MPIEXEC
  return "timeout 300 env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self,tcp "
         "OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_rmaps_base_oversubscribe=1 "
         "OMPI_MCA_mpi_yield_when_idle=1 OMPI_MCA_hwloc_base_binding_policy=none " PYPTO_MPIEXEC " ";
#else
  return "";
#endif
}
inline const char* kNoMpi = "this build has no MPI (scripts/setup.sh installs openmpi-bin and libopenmpi-dev; rebuild)";

// `CMD 2>&1` through the shell.
inline RunResult run_shell(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// `pypto-serving ARGS 2>&1` through the shell (ARGS may hold redirections and quotes).
inline RunResult run(const std::string& args) { return run_shell(kBinary + " " + args); }

// Whether `text` (a run's output) holds `what`.
inline bool has(const std::string& text, const std::string& what) { return text.find(what) != std::string::npos; }

// Every `token_ids: [...]` line an offline run prints (one per prompt, in order), joined.
inline std::string printed_token_ids(const std::string& out) {
  static const std::regex re(R"(token_ids: \[[^\]]*\])");
  std::string all;
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it) all += it->str() + "\n";
  return all;
}

// An offline run's `[speculative] D drafts, T draft tokens, A accepted ...` line; nullopt without one.
struct SpeculativeLine {
  long long drafts = 0, draft_tokens = 0, accepted = 0;
};
inline std::optional<SpeculativeLine> speculative_line(const std::string& out) {
  static const std::regex re(R"(\[speculative\] (\d+) drafts, (\d+) draft tokens, (\d+) accepted)");
  std::smatch m;
  if (!std::regex_search(out, m, re)) return std::nullopt;
  return SpeculativeLine{std::stoll(m[1].str()), std::stoll(m[2].str()), std::stoll(m[3].str())};
}

// A parallel run's counts `got` against the one-rank run's `one`: it drafted, and the drafts, draft
// tokens and accepted tokens are the same (`what` names the run in a failure).
inline void expect_same_counts(const SpeculativeLine& got, const SpeculativeLine& one, const std::string& what) {
  EXPECT_GT(got.draft_tokens, 0) << what;
  EXPECT_EQ(got.drafts, one.drafts) << what;
  EXPECT_EQ(got.draft_tokens, one.draft_tokens) << what;
  EXPECT_EQ(got.accepted, one.accepted) << what;
}

}  // namespace pypto::test
