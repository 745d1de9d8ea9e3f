#include "cli/soak_server.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"

extern char** environ;

namespace pypto::bench {
namespace {

std::string self_exe() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) fail("bench: cannot read /proc/self/exe to start the server");
  return std::string(buf, size_t(n));
}

std::vector<std::string> split_args(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

}  // namespace

ServerProcess::ServerProcess(const std::string& model, const std::string& args, const std::string& log_path,
                             double ready_timeout_s)
    : log_path_(log_path) {
  std::vector<std::string> argv_s = {self_exe(), "--model", model, "--host", "127.0.0.1", "--port", "0"};
  for (std::string& a : split_args(args)) argv_s.push_back(std::move(a));
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  const int rc = posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) fail("bench: cannot start the server ", argv_s[0], ": ", std::strerror(rc));
  std::string cmd;
  for (const std::string& a : argv_s) cmd += (cmd.empty() ? "" : " ") + a;
  log_info("bench: started the server (pid ", pid_, "): ", cmd, "; log ", log_path);

  const std::regex port_re(R"(serving model '[^']*' on http://[^:]+:(\d+))");
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(ready_timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    const std::string text = log_tail(1 << 20);
    std::smatch m;
    if (port_ == 0 && std::regex_search(text, m, port_re)) port_ = std::stoi(m[1].str());
    if (port_ > 0 && text.find("ready: /health answers 200") != std::string::npos) return;
    if (!running()) fail("bench: the server exited before it was ready (", exit_status(), "); its log:\n", log_tail());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop();
  fail("bench: the server was not ready after ", ready_timeout_s, " s; its log:\n", log_tail());
}

ServerProcess::~ServerProcess() { stop(); }

bool ServerProcess::running() {
  if (exited_ || pid_ <= 0) return false;
  if (::waitpid(pid_, &status_, WNOHANG) == pid_) exited_ = true;
  return !exited_;
}

std::string ServerProcess::exit_status() const {
  if (!exited_) return "running";
  if (WIFEXITED(status_)) return "exit code " + std::to_string(WEXITSTATUS(status_));
  if (WIFSIGNALED(status_)) return std::string("killed by signal ") + std::to_string(WTERMSIG(status_)) + " (" + strsignal(WTERMSIG(status_)) + ")";
  return "status " + std::to_string(status_);
}

std::string ServerProcess::log_tail(size_t bytes) const {
  std::ifstream f(log_path_);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  return s.size() > bytes ? s.substr(s.size() - bytes) : s;
}

bool ServerProcess::stop() {
  if (pid_ <= 0) return false;
  if (running()) {
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 3000 && running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (running()) {
      log_warn("bench: the server did not exit 30 s after SIGTERM; SIGKILL");
      ::kill(pid_, SIGKILL);
      while (running()) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  return WIFEXITED(status_) && WEXITSTATUS(status_) == 0;
}

}  // namespace pypto::bench
