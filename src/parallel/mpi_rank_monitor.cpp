#include "parallel/mpi_rank_monitor.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "parallel/mpi_communicator.h"
#include "parallel/rank_health.h"

#if PYPTO_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace pypto {

#if PYPTO_HAVE_MPI

namespace {
constexpr int kBeatTag = 1;
constexpr auto kBeatPeriod = std::chrono::milliseconds(100);
}  // namespace

struct MpiRankMonitor::State {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
  std::atomic<bool> stop{false};
  std::thread thread;

  // Rank >= 1: one beat every kBeatPeriod until stopped.
  void beat() {
    uint64_t n = 0;
    while (!stop.load()) {
      ++n;
      MPI_Request req;
      MPI_Isend(&n, 1, MPI_UINT64_T, 0, kBeatTag, comm, &req);
      // The send completes once rank 0 (or MPI's eager buffer) took it; never wait for a rank 0
      // that went away: mpirun ends this process then.
      for (int done = 0; !done;) {
        MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
        if (!done && stop.load()) {
          MPI_Request_free(&req);  // the send completes (or dies with the job) on its own
          return;
        }
      }
      std::this_thread::sleep_for(kBeatPeriod);
    }
  }

  // Rank 0: a receive posted per rank, tested every kBeatPeriod.
  void watch() {
    const int n = size - 1;
    std::vector<uint64_t> buf(size_t(n), 0);
    std::vector<MPI_Request> req(size_t(n), MPI_REQUEST_NULL);
    auto post = [&](int i) { MPI_Irecv(&buf[size_t(i)], 1, MPI_UINT64_T, i + 1, kBeatTag, comm, &req[size_t(i)]); };
    for (int i = 0; i < n; ++i) post(i);
    using Clock = std::chrono::steady_clock;
    std::vector<Clock::time_point> last(size_t(n), Clock::now());
    auto last_poll = Clock::now();
    while (!stop.load() && !ranks_stopping()) {
      std::this_thread::sleep_for(kBeatPeriod);
      const auto now = Clock::now();
      // This monitor did not run for a while (rank 0 paused, the machine overloaded): the other
      // ranks may not have run either, so their clocks restart instead of calling them hung.
      if (now - last_poll > std::chrono::seconds(1))
        for (auto& t : last) t = now;
      last_poll = now;
      for (int i = 0; i < n; ++i) {
        for (int done = 1; done;) {  // take every beat that arrived
          MPI_Test(&req[size_t(i)], &done, MPI_STATUS_IGNORE);
          if (done) {
            last[size_t(i)] = now;
            post(i);
          }
        }
        if (now - last[size_t(i)] > std::chrono::seconds(kHangSeconds) && !ranks_stopping())
          fail_job(str_cat("tensor-parallel rank ", i + 1, " (mpi) stopped answering (no heartbeat for ", kHangSeconds,
                           " s)"));
      }
    }
    for (auto& r : req)
      if (r != MPI_REQUEST_NULL) {
        MPI_Cancel(&r);
        MPI_Wait(&r, MPI_STATUS_IGNORE);
      }
  }

  [[noreturn]] void fail_job(const std::string& why) {
    record_rank_fault(why);
    log_error(why, ": /health reports unhealthy; aborting the MPI job in ", kReportSeconds, " s");
    std::this_thread::sleep_for(std::chrono::seconds(kReportSeconds));
    std::fprintf(stderr, "pypto-serving: error: %s; the engine cannot run without it, exiting\n", why.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);  // mpirun kills every rank
    std::_Exit(1);
  }
};

std::unique_ptr<MpiRankMonitor> MpiRankMonitor::start() {
  int level = 0;
  MPI_Query_thread(&level);
  if (level < MPI_THREAD_MULTIPLE) {
    log_warn("--distributed-executor-backend mpi: the MPI library gives thread level ", level,
             ", not MPI_THREAD_MULTIPLE: a rank that hangs without dying goes unnoticed (a rank that dies still "
             "ends the job)");
    return nullptr;
  }
  auto m = std::unique_ptr<MpiRankMonitor>(new MpiRankMonitor());
  m->s_ = std::make_unique<State>();
  State& s = *m->s_;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &s.comm) != MPI_SUCCESS) fail("MPI_Comm_dup for the rank heartbeats failed");
  MPI_Comm_rank(s.comm, &s.rank);
  MPI_Comm_size(s.comm, &s.size);
  if (s.size > 1) s.thread = std::thread([&s] { s.rank == 0 ? s.watch() : s.beat(); });
  return m;
}

MpiRankMonitor::~MpiRankMonitor() {
  if (!s_) return;
  s_->stop.store(true);
  if (s_->thread.joinable()) s_->thread.join();
  // Not MPI_Comm_free: it is collective, and a rank 0 that stops early (a load failure) must not
  // wait for the others here. MPI_Finalize releases it.
}

#else  // !PYPTO_HAVE_MPI

struct MpiRankMonitor::State {};
std::unique_ptr<MpiRankMonitor> MpiRankMonitor::start() { return nullptr; }
MpiRankMonitor::~MpiRankMonitor() = default;

#endif

}  // namespace pypto
