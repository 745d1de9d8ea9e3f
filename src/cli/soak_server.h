#pragma once
// `bench soak` / `bench fairness` without --url: the server they start themselves (this same
// binary in serve mode on 127.0.0.1 and a free port), whose pid the leak checker reads.
#include <sys/types.h>

#include <string>

namespace pypto::bench {

class ServerProcess {
 public:
  // Runs `<this binary> --model MODEL --host 127.0.0.1 --port 0 ARGS` (ARGS split on spaces),
  // output to `log_path`; waits up to `ready_timeout_s` for "ready: /health answers 200". Error
  // naming the log's tail when it exits or never gets ready.
  ServerProcess(const std::string& model, const std::string& args, const std::string& log_path, double ready_timeout_s);
  ~ServerProcess();  // stop()
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  pid_t pid() const { return pid_; }
  bool running();           // false once it has exited (then exit_status() tells how)
  std::string exit_status() const;
  std::string log_tail(size_t bytes = 2000) const;
  // SIGTERM, SIGKILL after 30 s. True when it exited 0 on SIGTERM (a clean drain).
  bool stop();

 private:
  std::string log_path_;
  pid_t pid_ = -1;
  int port_ = 0;
  bool exited_ = false;
  int status_ = 0;
};

}  // namespace pypto::bench
