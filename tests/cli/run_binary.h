#pragma once
// Runs the real pypto-serving binary for the CLI tests: its exit code and its stdout and stderr
// together.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace pypto::test {

inline const std::string kBinary = PYPTO_BINARY_DIR "/src/cli/pypto-serving";

struct RunResult {
  int exit_code;
  std::string output;  // stdout and stderr together
};

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

}  // namespace pypto::test
