#include "parallel/mpi_heartbeat.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/log.h"
#include "parallel/rank_health.h"

#if PYPTO_HAVE_MPI
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace pypto {

#if PYPTO_HAVE_MPI

struct MpiHeartbeat::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0, size = 1;
};

namespace {
constexpr int kBeatTag = 11;
}  // namespace

std::unique_ptr<MpiHeartbeat> MpiHeartbeat::start() {
  std::unique_ptr<MpiHeartbeat> h(new MpiHeartbeat());
  h->impl_ = std::make_unique<Impl>();
  Impl& m = *h->impl_;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &m.comm) != MPI_SUCCESS) fail("MPI_Comm_dup for the heartbeats failed");
  MPI_Comm_rank(m.comm, &m.rank);
  MPI_Comm_size(m.comm, &m.size);
  if (m.size == 1) return h;
  // Rank 0's watcher must not take SIGINT/SIGTERM (the server's signal thread drains on them).
  sigset_t block, old;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &block, &old);
  MpiHeartbeat* p = h.get();
  h->thread_ = m.rank == 0 ? std::thread([p] { p->watch(); }) : std::thread([p] { p->beat(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  return h;
}

MpiHeartbeat::~MpiHeartbeat() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  // The communicator is left to MPI_Finalize: a late heartbeat may still be in flight to rank 0.
}

void MpiHeartbeat::beat() {
  const char byte = 1;
  while (!stop_.load()) {
    MPI_Send(&byte, 1, MPI_BYTE, 0, kBeatTag, impl_->comm);  // eager: returns at once
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void MpiHeartbeat::watch() {
  using Clock = std::chrono::steady_clock;
  const Impl& m = *impl_;
  std::vector<Clock::time_point> last(size_t(m.size), Clock::now());
  auto last_poll = Clock::now();
  while (!stop_.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (;;) {  // every heartbeat that arrived
      int flag = 0;
      MPI_Status st;
      MPI_Iprobe(MPI_ANY_SOURCE, kBeatTag, m.comm, &flag, &st);
      if (!flag) break;
      char byte;
      MPI_Recv(&byte, 1, MPI_BYTE, st.MPI_SOURCE, kBeatTag, m.comm, MPI_STATUS_IGNORE);
      last[size_t(st.MPI_SOURCE)] = Clock::now();
    }
    if (stop_.load() || ranks_stopping()) return;
    const auto now = Clock::now();
    // This thread did not run for a while (rank 0 or the machine paused): the others may not have
    // either, so restart their clocks instead of calling them hung.
    if (now - last_poll > std::chrono::seconds(1))
      for (auto& t : last) t = now;
    last_poll = now;
    for (int r = 1; r < m.size; ++r) {
      if (now - last[size_t(r)] <= std::chrono::seconds(kHangSeconds)) continue;
      const std::string why = str_cat("rank ", r, " of the mpirun job stopped answering (no heartbeat for ",
                                      kHangSeconds, " s)");
      record_rank_fault(why);
      log_error(why, ": /health reports unhealthy; exiting in ", kReportSeconds, " s (mpirun then ends the other ranks)");
      std::this_thread::sleep_for(std::chrono::seconds(kReportSeconds));
      std::fprintf(stderr, "pypto-serving: error: %s; the engine cannot run without it, exiting\n", why.c_str());
      std::fflush(stderr);
      _exit(1);
    }
  }
}

#else  // !PYPTO_HAVE_MPI

struct MpiHeartbeat::Impl {};
std::unique_ptr<MpiHeartbeat> MpiHeartbeat::start() { return nullptr; }
MpiHeartbeat::~MpiHeartbeat() = default;
void MpiHeartbeat::watch() {}
void MpiHeartbeat::beat() {}

#endif

}  // namespace pypto
