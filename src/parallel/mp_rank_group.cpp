#include "parallel/mp_rank_group.h"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/log.h"
#include "parallel/mpi_communicator.h"
#include "parallel/rank_health.h"

namespace pypto {
namespace {

constexpr const char* kRankEnv = "PYPTO_MP_RANK";
constexpr const char* kFdEnv = "PYPTO_MP_GROUP_FD";
constexpr const char* kStageFdEnv = "PYPTO_MP_STAGE_GROUP_FD";  // --pp with --tp > 1
constexpr const char* kReplicaFdEnv = "PYPTO_MP_REPLICA_GROUP_FD";  // --dp > 1
constexpr const char* kLinkFdEnv = "PYPTO_MP_LINK_GROUP_FD";  // --dp > 1: a replica's leader
constexpr const char* kReturnFdEnv = "PYPTO_MP_RETURN_GROUP_FD";  // --pp-virtual-engines: the last stage

std::string describe_status(int status) {
  if (WIFEXITED(status)) return str_cat("exited with status ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return str_cat("was killed by signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  return "stopped";
}

}  // namespace

std::unique_ptr<MpRankGroup> MpRankGroup::start(int ranks, char** argv, int tp, int per_replica, bool return_link) {
  PYPTO_ASSERT(tp >= 1 && per_replica % tp == 0 && ranks % per_replica == 0, ranks, " ranks in replicas of ",
               per_replica, " in stages of ", tp);
  std::unique_ptr<MpRankGroup> g(new MpRankGroup());
  g->rank_ = 0;
  g->tp_ = tp;
  g->per_replica_ = per_replica;
  g->group_ = ProcessShmGroup::create(ranks);
  g->comm_ = std::make_shared<ProcessShmCommunicator>(g->group_, 0);
  g->replica_comm_ = g->comm_;
  if (per_replica > tp && tp > 1) {  // every replica's every stage (global stage r / tp)
    for (int s = 0; s < ranks / tp; ++s) g->stage_groups_.push_back(ProcessShmGroup::create(tp));
    g->stage_comm_ = std::make_shared<ProcessShmCommunicator>(g->stage_groups_[0], 0);
  }
  if (ranks > per_replica) {
    for (int i = 0; i < ranks / per_replica; ++i) g->replica_groups_.push_back(ProcessShmGroup::create(per_replica));
    g->replica_comm_ = std::make_shared<ProcessShmCommunicator>(g->replica_groups_[0], 0);
    for (int i = 1; i < ranks / per_replica; ++i) {
      g->link_groups_.push_back(ProcessShmGroup::create(2));
      g->link_comms_.push_back(std::make_shared<ProcessShmCommunicator>(g->link_groups_.back(), 0));
    }
  }
  if (return_link) {
    PYPTO_ASSERT(ranks == per_replica && per_replica > tp, "a return link needs one replica of several stages");
    g->return_group_ = ProcessShmGroup::create(2);
    g->return_comm_ = std::make_shared<ProcessShmCommunicator>(g->return_group_, 0);
  }
  const pid_t parent = getpid();
  // This binary's path (resolved now: the children's process name is then pypto-serving, not exe).
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) fail("starting the tensor-parallel ranks: cannot resolve /proc/self/exe: ", std::strerror(errno));
  self[len] = '\0';
  for (int r = 1; r < ranks; ++r) {
    const int stage_fd = g->stage_groups_.empty() ? -1 : g->stage_groups_[size_t(r / tp)]->fd();
    const int replica_fd = g->replica_groups_.empty() ? -1 : g->replica_groups_[size_t(r / per_replica)]->fd();
    const int link_fd = !g->link_groups_.empty() && r % per_replica == 0 ? g->link_groups_[size_t(r / per_replica - 1)]->fd() : -1;
    const pid_t pid = fork();
    if (pid < 0) {
      g->reap_children(0);
      fail("starting tensor-parallel rank ", r, ": fork: ", std::strerror(errno));
    }
    if (pid == 0) {
      // The child: only async-signal-safe calls until exec.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(1);  // rank 0 is already gone
      // Ctrl-C (SIGINT to the terminal's process group) or SIGTERM to every process of a service
      // is for rank 0, which stops the engine and then the ranks; ignored dispositions survive exec.
      struct sigaction ignore{};
      ignore.sa_handler = SIG_IGN;
      sigaction(SIGINT, &ignore, nullptr);
      sigaction(SIGTERM, &ignore, nullptr);
      char rank_s[16], fd_s[16], stage_s[16], replica_s[16], link_s[16];
      std::snprintf(rank_s, sizeof rank_s, "%d", r);
      std::snprintf(fd_s, sizeof fd_s, "%d", g->group_->fd());
      std::snprintf(stage_s, sizeof stage_s, "%d", stage_fd);
      std::snprintf(replica_s, sizeof replica_s, "%d", replica_fd);
      std::snprintf(link_s, sizeof link_s, "%d", link_fd);
      setenv(kRankEnv, rank_s, 1);
      setenv(kFdEnv, fd_s, 1);
      if (stage_fd >= 0) setenv(kStageFdEnv, stage_s, 1);
      if (replica_fd >= 0) setenv(kReplicaFdEnv, replica_s, 1);
      if (link_fd >= 0) setenv(kLinkFdEnv, link_s, 1);
      if (g->return_group_ && r == per_replica - tp) {  // the last stage's TP rank 0
        char return_s[16];
        std::snprintf(return_s, sizeof return_s, "%d", g->return_group_->fd());
        setenv(kReturnFdEnv, return_s, 1);
      }
      execv(self, argv);
      _exit(127);
    }
    g->children_.push_back(pid);
  }
  // The monitor must not take SIGINT/SIGTERM (their default action would end rank 0 without the
  // server's drain): it starts with them blocked, as the server's own threads do.
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  g->thread_ = std::thread([p = g.get()] { p->watch(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return g;
}

std::unique_ptr<MpRankGroup> MpRankGroup::join_from_env() {
  const char* rank_s = std::getenv(kRankEnv);
  const char* fd_s = std::getenv(kFdEnv);
  if (!rank_s || !fd_s) return nullptr;
  std::unique_ptr<MpRankGroup> g(new MpRankGroup());
  g->rank_ = std::atoi(rank_s);
  g->group_ = ProcessShmGroup::attach(std::atoi(fd_s));
  g->comm_ = std::make_shared<ProcessShmCommunicator>(g->group_, g->rank_);
  g->replica_comm_ = g->comm_;
  if (const char* stage_s = std::getenv(kStageFdEnv)) {
    g->stage_groups_.push_back(ProcessShmGroup::attach(std::atoi(stage_s)));
    g->tp_ = g->stage_groups_[0]->size();
    g->stage_comm_ = std::make_shared<ProcessShmCommunicator>(g->stage_groups_[0], g->rank_ % g->tp_);
  }
  if (const char* replica_s = std::getenv(kReplicaFdEnv)) {  // replicas are contiguous rank ranges
    g->replica_groups_.push_back(ProcessShmGroup::attach(std::atoi(replica_s)));
    g->per_replica_ = g->replica_groups_[0]->size();
    g->replica_comm_ = std::make_shared<ProcessShmCommunicator>(g->replica_groups_[0], g->rank_ % g->per_replica_);
  }
  if (const char* link_s = std::getenv(kLinkFdEnv)) {
    g->link_groups_.push_back(ProcessShmGroup::attach(std::atoi(link_s)));
    g->link_comms_.push_back(std::make_shared<ProcessShmCommunicator>(g->link_groups_[0], 1));
  }
  if (const char* return_s = std::getenv(kReturnFdEnv)) {
    g->return_group_ = ProcessShmGroup::attach(std::atoi(return_s));
    g->return_comm_ = std::make_shared<ProcessShmCommunicator>(g->return_group_, 1);
  }
  unsetenv(kRankEnv);
  unsetenv(kFdEnv);
  unsetenv(kReturnFdEnv);
  unsetenv(kStageFdEnv);
  unsetenv(kReplicaFdEnv);
  unsetenv(kLinkFdEnv);
  g->thread_ = std::thread([p = g.get()] {
    while (!p->stop_.load()) {
      p->group_->beat(p->rank_);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  return g;
}

MpRankGroup::~MpRankGroup() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  if (rank_ == 0) {
    // Normally the executor has sent Stop (or a failed load told every rank to stop) and the
    // children exit by themselves; if rank 0 failed before that (a bad flag, no tokenizer), they
    // still wait for their first message: end them now instead of after the timeout.
    const bool told = ranks_stopping();
    mark_ranks_stopping();
    if (!told)
      for (pid_t pid : children_)
        if (pid > 0) kill(pid, SIGKILL);
    reap_children(10);
  }
}

void MpRankGroup::reap_children(double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (pid_t& pid : children_) {
    while (pid > 0) {
      int status = 0;
      const pid_t got = waitpid(pid, &status, WNOHANG);
      if (got == pid || got < 0) {
        pid = 0;
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        pid = 0;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

std::string MpRankGroup::describe_rank(int r) const {
  if (group_->size() == tp_) return str_cat("tensor-parallel rank ", r);
  const std::string replica = group_->size() > per_replica_ ? str_cat("replica ", r / per_replica_, ", ") : "";
  if (per_replica_ == tp_) return str_cat("rank ", r, " (", replica, "tensor-parallel rank ", r % tp_, ")");
  return str_cat("rank ", r, " (", replica, "pipeline stage ", (r % per_replica_) / tp_, ", tensor-parallel rank ",
                 r % tp_, ")");
}

void MpRankGroup::watch() {
  const int n = static_cast<int>(children_.size());
  std::vector<uint64_t> last_beat(size_t(n), 0);
  std::vector<std::chrono::steady_clock::time_point> last_change(size_t(n), std::chrono::steady_clock::now());
  const std::string host = this_host_name();
  auto last_poll = std::chrono::steady_clock::now();
  while (!stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (stop_.load() || ranks_stopping()) return;
    const auto now = std::chrono::steady_clock::now();
    // If this monitor itself did not run for a while (rank 0 stopped, the machine paused or
    // overloaded), the children may not have run either: restart their clocks instead of
    // calling them hung. A hang is kHangSeconds of this monitor running without a beat.
    if (now - last_poll > std::chrono::seconds(1))
      for (auto& t : last_change) t = now;
    last_poll = now;
    for (int i = 0; i < n; ++i) {
      const int r = i + 1;
      const pid_t pid = children_[size_t(i)];
      if (pid <= 0) continue;
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        children_[size_t(i)] = 0;
        if (ranks_stopping()) return;  // a load failure: rank 0 reports it
        fail_group(str_cat(describe_rank(r), " (pid ", pid, ") on ", host, " ", describe_status(status)));
      }
      const uint64_t beat = group_->heartbeat(r);
      if (beat != last_beat[size_t(i)]) {
        last_beat[size_t(i)] = beat;
        last_change[size_t(i)] = now;
      } else if (now - last_change[size_t(i)] > std::chrono::seconds(kHangSeconds)) {
        fail_group(str_cat(describe_rank(r), " (pid ", pid, ") on ", host, " stopped answering (no heartbeat for ",
                           kHangSeconds, " s)"));
      }
    }
  }
}

void MpRankGroup::fail_group(const std::string& why) {
  record_rank_fault(why);
  log_error(why, ": /health reports unhealthy; stopping every rank and exiting in ", kReportSeconds, " s");
  group_->mark_broken();
  for (auto& sg : stage_groups_) sg->mark_broken();
  for (auto& rg : replica_groups_) rg->mark_broken();
  for (auto& lg : link_groups_) lg->mark_broken();
  if (return_group_) return_group_->mark_broken();
  std::this_thread::sleep_for(std::chrono::seconds(kReportSeconds));
  for (pid_t pid : children_)
    if (pid > 0) kill(pid, SIGKILL);
  for (pid_t pid : children_)
    if (pid > 0) waitpid(pid, nullptr, 0);
  std::fprintf(stderr, "pypto-serving: error: %s; the engine cannot run without it, exiting\n", why.c_str());
  std::fflush(stderr);
  _exit(1);
}

}  // namespace pypto
