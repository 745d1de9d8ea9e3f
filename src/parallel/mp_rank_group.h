#pragma once
// --distributed-executor-backend mp: the TP ranks of one host as processes. Rank 0 (the process the
// user started) creates the shared-memory group (process_shm_communicator.h) and starts ranks
// 1..tp-1 as children running this same binary with the same arguments; a child finds its rank
// and the group's memfd in $PYPTO_MP_RANK and $PYPTO_MP_GROUP_FD and runs the rank worker.
//
// Faults (rank 0 watches, every 100 ms): a child that exits while the engine runs, or whose
// heartbeat (bumped every 100 ms by a thread of the child) has not moved for kHangSeconds while
// the monitor itself ran (a pause of rank 0 too, e.g. the whole machine stopped, restarts the
// clock), is a fault: rank 0 records it (/health answers 503), logs which rank, pid, host and
// why, marks the group broken (waiting collectives throw), waits kReportSeconds so clients see
// it, kills the other children, reaps them (no zombies) and exits with status 1. A child dies with rank 0
// (PR_SET_PDEATHSIG), so rank 0 dying leaves no orphan either. Children ignore SIGINT and SIGTERM:
// Ctrl-C or a service manager's SIGTERM to every process is rank 0's to handle (it drains, then
// stops the ranks), and must not look like a rank dying.
#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "parallel/communicator.h"
#include "parallel/process_shm_communicator.h"

namespace pypto {

class MpRankGroup {
 public:
  static constexpr int kHangSeconds = 5;
  static constexpr int kReportSeconds = 2;

  // Rank 0: starts ranks - 1 children re-running `argv` with this binary (/proc/self/exe, resolved).
  // Pipeline parallelism: ranks = pp × tp, and each stage's tp ranks (stage * tp .. + tp - 1) also
  // get a shared-memory group of their own for their collectives (stage_comm(); the group of
  // every rank, comm(), then carries the step's batch and the stages' point-to-point messages).
  static std::unique_ptr<MpRankGroup> start(int ranks, char** argv, int tp);
  // In a child started by start(): joins the group; null when this process is not one.
  static std::unique_ptr<MpRankGroup> join_from_env();
  // Rank 0: stops watching, then waits up to 10 s for the children to exit (they do after the
  // executor's Stop) and kills any left; children never told to stop (rank 0 failed before its
  // engine ran) are killed at once. A child: stops its heartbeat.
  ~MpRankGroup();

  int rank() const { return rank_; }
  std::shared_ptr<Communicator> comm() const { return comm_; }
  // This rank's pipeline stage's TP group; null unless pp > 1 and tp > 1.
  std::shared_ptr<Communicator> stage_comm() const { return stage_comm_; }

 private:
  MpRankGroup() = default;
  void watch();                   // rank 0's monitor thread
  [[noreturn]] void fail_group(const std::string& why);
  void reap_children(double timeout_s);
  std::string describe_rank(int r) const;  // "tensor-parallel rank 1" / "rank 2 (pipeline stage 1, ...)"

  int rank_ = 0;
  std::shared_ptr<ProcessShmGroup> group_;
  std::shared_ptr<Communicator> comm_;
  std::vector<std::shared_ptr<ProcessShmGroup>> stage_groups_;  // rank 0: every stage's; a child: its own
  std::shared_ptr<Communicator> stage_comm_;
  int tp_ = 0;  // ranks per pipeline stage (== the group's size without --pp)
  std::vector<pid_t> children_;   // rank 0: children_[r - 1] is rank r (0 once reaped)
  std::atomic<bool> stop_{false};
  std::thread thread_;            // rank 0: watch(); a child: the heartbeat
};

}  // namespace pypto
