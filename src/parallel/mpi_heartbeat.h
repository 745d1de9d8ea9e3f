#pragma once
// Liveness of the ranks of an mpirun job (--distributed-executor-backend mpi). mpirun ends the job
// when a rank dies, but a rank that stops without dying (frozen, stuck in the kernel, its host
// paused) leaves every other rank waiting in a collective for ever. So every rank but 0 runs a
// thread that sends rank 0 a one-byte heartbeat every 100 ms on a communicator of its own, and
// rank 0 runs a thread that receives them: when a rank's heartbeat has not come for kHangSeconds
// while rank 0's thread itself ran (a pause of rank 0 too restarts the clock), rank 0 records the
// fault (/health answers 503), logs which rank and host, and exits with status 1 after
// kReportSeconds; mpirun then ends the other ranks. The threads make MPI calls next to the engine
// thread's, so MPI runs at MPI_THREAD_MULTIPLE (mpi_communicator.h).
#include <atomic>
#include <memory>
#include <thread>

namespace pypto {

class MpiHeartbeat {
 public:
  static constexpr int kHangSeconds = 5;
  static constexpr int kReportSeconds = 1;  // mpirun then takes ~2 s to end the job

  // Every rank of the job calls it once, after make_mpi_world_communicator() and in the same order
  // as its other collectives (it duplicates MPI_COMM_WORLD). Null when MPI is not built in.
  static std::unique_ptr<MpiHeartbeat> start();
  // Stops the thread (rank 0: stops watching first). Call before mpi_finalize().
  ~MpiHeartbeat();

 private:
  MpiHeartbeat() = default;
  void watch();  // rank 0
  void beat();   // the other ranks
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace pypto
