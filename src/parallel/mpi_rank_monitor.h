#pragma once
// --distributed-executor-backend mpi: noticing a rank that stops answering without dying. A rank
// that dies ends the job through mpirun (it kills the others); a rank that hangs (stopped,
// deadlocked, its host frozen) would leave every other rank waiting in a collective forever.
//
// Every rank >= 1 runs a heartbeat thread that sends rank 0 a counter every 100 ms, point to point
// on a communicator of its own (a duplicate of MPI_COMM_WORLD, so beats never meet the step's
// messages). Rank 0's monitor thread receives them; a rank whose beat has not arrived for
// kHangSeconds while the monitor itself ran (a pause of rank 0 too, e.g. the whole machine
// stopped, restarts the clock) is a fault: rank 0 records it (/health answers 503), logs which
// rank, host and why, waits kReportSeconds so clients see it, and aborts the job (MPI_Abort:
// mpirun kills every rank), so the server exits non-zero and leaves no process behind.
//
// Needs MPI_THREAD_MULTIPLE (the beats run beside the engine thread's collectives); when the MPI
// library does not give it, start() logs one line saying hangs go unnoticed and returns null.
#include <memory>

namespace pypto {

class MpiRankMonitor {
 public:
  static constexpr int kHangSeconds = 5;
  static constexpr int kReportSeconds = 1;

  // Collective: every rank of the job calls it once, after make_mpi_world_communicator().
  static std::unique_ptr<MpiRankMonitor> start();
  // Stops the thread (rank 0 stops watching first; call after the engine stopped the ranks).
  ~MpiRankMonitor();

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace pypto
