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
  // Pipeline parallelism: a replica has pp × tp ranks, and each stage's tp ranks (stage * tp .. +
  // tp - 1) also get a shared-memory group of their own for their collectives (stage_comm()).
  // Data parallelism (--dp): ranks = dp × per_replica; replica i is ranks [i·per_replica, (i+1)·
  // per_replica), with a group of its own (replica_comm(): the step's batch, the stages'
  // point-to-point messages), and replica i > 0's first rank (its leader) shares a two-rank group
  // with rank 0 (link_comm()/link_comms(): rank 0 sends it the replica's step batches and gets the
  // logits back). comm() spans every rank (start-up and heartbeats); with dp == 1 it is the
  // replica's group.
  // return_link (--pp-virtual-engines, dp == 1): a two-rank group of rank 0 and the last stage's
  // TP rank 0 (return_comm(); rank 0 is rank 0 of it) for the logits.
  static std::unique_ptr<MpRankGroup> start(int ranks, char** argv, int tp, int per_replica, bool return_link = false);
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
  // This rank's replica's ranks (comm() when dp == 1).
  std::shared_ptr<Communicator> replica_comm() const { return replica_comm_; }
  // Rank 0: its links to replicas 1 .. dp-1 (in order; rank 0 is rank 0 of each). A replica's
  // leader: its one link to rank 0 (in which it is rank 1). Empty otherwise.
  const std::vector<std::shared_ptr<Communicator>>& link_comms() const { return link_comms_; }
  // start(..., return_link): on rank 0 and the last stage's TP rank 0; null elsewhere.
  std::shared_ptr<Communicator> return_comm() const { return return_comm_; }

 private:
  MpRankGroup() = default;
  void watch();                   // rank 0's monitor thread
  [[noreturn]] void fail_group(const std::string& why);
  void reap_children(double timeout_s);
  std::string describe_rank(int r) const;  // "tensor-parallel rank 1" / "rank 2 (replica 1, pipeline stage 0, ...)"

  int rank_ = 0;
  std::shared_ptr<ProcessShmGroup> group_;
  std::shared_ptr<Communicator> comm_;
  std::vector<std::shared_ptr<ProcessShmGroup>> stage_groups_;  // rank 0: every stage's; a child: its own
  std::shared_ptr<Communicator> stage_comm_;
  std::vector<std::shared_ptr<ProcessShmGroup>> replica_groups_;  // dp > 1; rank 0: every replica's
  std::shared_ptr<Communicator> replica_comm_;
  std::vector<std::shared_ptr<ProcessShmGroup>> link_groups_;  // rank 0: every link; a leader: its own
  std::vector<std::shared_ptr<Communicator>> link_comms_;
  std::shared_ptr<ProcessShmGroup> return_group_;
  std::shared_ptr<Communicator> return_comm_;
  int tp_ = 0;           // ranks per pipeline stage (== the group's size without --pp)
  int per_replica_ = 0;  // pp × tp (== the group's size without --dp)
  std::vector<pid_t> children_;   // rank 0: children_[r - 1] is rank r (0 once reaped)
  std::atomic<bool> stop_{false};
  std::thread thread_;            // rank 0: watch(); a child: the heartbeat
};

}  // namespace pypto
