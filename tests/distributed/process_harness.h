#pragma once
// Helpers for the process-rank tests: the binary, mpirun on loopback, a server process whose
// children are the other ranks, and an HTTP client for it.
#include <signal.h>
#include <spawn.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../cli/run_binary.h"  // kBinary, RunResult, run_shell

extern char** environ;

namespace pypto::test {

// has(text, what): tests/cli/run_binary.h.

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The pids of `pid`'s children (/proc/PID/task/PID/children).
inline std::vector<pid_t> children_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  std::vector<pid_t> out;
  pid_t c;
  while (f >> c) out.push_back(c);
  return out;
}

// True while `pid` runs (a zombie whose parent has not reaped it yet counts as gone: it holds no
// memory and runs nothing).
// Every process below `pid` (children, their children, ...).
inline std::vector<pid_t> descendants_of(pid_t pid) {
  std::vector<pid_t> out = children_of(pid);
  for (size_t i = 0; i < out.size(); ++i)
    for (pid_t c : children_of(out[i])) out.push_back(c);
  return out;
}

inline bool process_running(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

// Freezes every thread of `pid` in ptrace-stop (PTRACE_SEIZE + PTRACE_INTERRUPT): a rank that
// stops answering. Unlike SIGSTOP, a SIGCONT from elsewhere (shared machines run CPU-share
// limiters that stop and continue busy processes) does not resume it. The tracer thread then
// reaps the traced threads as they die (the real parent can reap the process only after its
// tracer has), for at most `seconds`.
class PtraceFreeze {
 public:
  PtraceFreeze(pid_t pid, double seconds) {
    thread_ = std::thread([this, pid, seconds] { run(pid, seconds); });  // ptrace is per thread
    while (!ready_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~PtraceFreeze() { thread_.join(); }
  bool frozen() const { return frozen_; }

 private:
  void run(pid_t pid, double seconds) {
    std::vector<pid_t> tids;
    for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
      const pid_t tid = std::stoi(e.path().filename().string());
      if (ptrace(PTRACE_SEIZE, tid, nullptr, nullptr) == 0 && ptrace(PTRACE_INTERRUPT, tid, nullptr, nullptr) == 0)
        tids.push_back(tid);
    }
    frozen_ = !tids.empty();
    ready_.store(true);
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    size_t gone = 0;
    while (gone < tids.size() && std::chrono::steady_clock::now() < end) {
      for (pid_t& tid : tids) {
        int st = 0;
        if (tid > 0 && waitpid(tid, &st, __WALL | WNOHANG) == tid && (WIFEXITED(st) || WIFSIGNALED(st))) {
          tid = 0;
          ++gone;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  std::thread thread_;
  std::atomic<bool> ready_{false};
  bool frozen_ = false;
};

// A server started with `COMMAND --port 0` (COMMAND: the binary or an mpirun line) whose output
// goes to `log`; the port is read from the log.
class ServerProcess {
 public:
  ServerProcess(const std::string& command, const std::filesystem::path& log) : log_(log) {
    const std::string cmd = "exec " + command + " --port 0 --host 127.0.0.1 > " + log.string() + " 2>&1";
    const char* argv[] = {"/bin/sh", "-c", cmd.c_str(), nullptr};
    if (posix_spawn(&pid_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) pid_ = -1;
  }
  ~ServerProcess() { stop(); }
  // SIGTERM, then SIGKILL after 30 s; returns once it has exited.
  void stop() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGTERM);
      wait_exit(30);
      if (!exited_) {
        ::kill(pid_, SIGKILL);
        wait_exit(30);
      }
    }
  }
  pid_t pid() const { return pid_; }
  // The port once the server is ready (0 after `seconds`).
  int wait_port(int seconds) {
    const std::regex re(R"(serving model '[^']*' on http://[^:]+:(\d+))");
    for (int i = 0; i < seconds * 10; ++i) {
      const std::string text = log();
      std::smatch m;
      if (std::regex_search(text, m, re) && has(text, "ready: /health answers 200")) return std::stoi(m[1].str());
      if (exited()) return 0;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return 0;
  }
  // Reaps the process if it has exited; true once it has.
  bool exited() {
    if (exited_) return true;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) {
      exited_ = true;
      status_ = st;
    }
    return exited_;
  }
  // Waits up to `seconds` for the exit; true when it exited.
  bool wait_exit(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!exited() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return exited_;
  }
  int exit_code() const { return WIFEXITED(status_) ? WEXITSTATUS(status_) : -1; }
  std::string log() const { return read_file(log_); }

 private:
  std::filesystem::path log_;
  pid_t pid_ = -1;
  bool exited_ = false;
  int status_ = 0;
};

}  // namespace pypto::test
