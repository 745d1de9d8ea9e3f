// bench_allreduce: the cost of one TP all-reduce at decode-step sizes, for each way the ranks can
// talk on one host, and what it adds to a decode step (2 all-reduces per layer + the embedding's).
//   bench_allreduce threads   two threads of one process, ShmCommunicator (ranks read each other)
//   bench_allreduce mp        two processes (fork), ProcessShmCommunicator (staging slots)
//   mpirun -np 2 bench_allreduce mpi   two processes, MpiCommunicator (alltoall + allgather)
// For each size (rows × hidden floats) it prints the median and p90 of 2000 calls in µs, and the
// per-step all-reduce time for qwen3-0.6b (28 layers, hidden 1024) and qwen3-14b (40 layers,
// hidden 5120) at that many rows.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/cpu_features.h"
#include "parallel/mpi_communicator.h"
#include "parallel/process_shm_communicator.h"
#include "parallel/shm_communicator.h"

namespace {

using pypto::Communicator;

constexpr int kIters = 2000, kWarmup = 200;

struct Stat {
  double p50_us, p90_us;
};

// Every rank runs this; rank 0's timings are reported (a collective ends on all ranks together).
Stat time_all_reduce(Communicator& c, int64_t n) {
  std::vector<float> x(static_cast<size_t>(n), 1.f);
  std::vector<double> t;
  t.reserve(kIters);
  for (int i = 0; i < kWarmup + kIters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    c.all_reduce_sum(x.data(), n);
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    if (i >= kWarmup) t.push_back(us);
    std::fill(x.begin(), x.end(), 1.f);
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t[t.size() * 9 / 10]};
}

void run_sizes(Communicator& c, const char* mode) {
  const int rows_list[] = {1, 4, 16};
  const int hiddens[] = {1024, 5120};
  if (c.rank() == 0) {
    std::printf("bench_allreduce %s: %d ranks, %d usable cores, isa %s\n", mode, c.size(), pypto::cpu_count(),
                pypto::isa_name(pypto::cpu_isa()));
    std::printf("| floats (rows x hidden) | p50 us | p90 us | per decode step (layers x 2 + 1) |\n|---|---:|---:|---:|\n");
  }
  for (int hidden : hiddens)
    for (int rows : rows_list) {
      const int64_t n = int64_t(rows) * hidden;
      const Stat s = time_all_reduce(c, n);
      const int layers = hidden == 1024 ? 28 : 40;
      if (c.rank() == 0)
        std::printf("| %d x %d | %.1f | %.1f | %.2f ms (%s, %d layers) |\n", rows, hidden, s.p50_us, s.p90_us,
                    s.p50_us * (2 * layers + 1) / 1000.0, hidden == 1024 ? "qwen3-0.6b" : "qwen3-14b", layers);
      std::fflush(stdout);
    }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "threads") {
    auto comms = pypto::make_shm_communicators(2);
    std::thread other([&] { run_sizes(*comms[1], "threads"); });
    run_sizes(*comms[0], "threads");
    other.join();
    return 0;
  }
  if (mode == "mp") {
    auto group = pypto::ProcessShmGroup::create(2);
    const pid_t pid = fork();
    if (pid == 0) {
      pypto::ProcessShmCommunicator c(group, 1);
      run_sizes(c, "mp");
      _exit(0);
    }
    pypto::ProcessShmCommunicator c(group, 0);
    run_sizes(c, "mp");
    waitpid(pid, nullptr, 0);
    return 0;
  }
  if (mode == "mpi") {
    auto c = pypto::make_mpi_world_communicator();
    run_sizes(*c, "mpi");
    c.reset();
    pypto::mpi_finalize();
    return 0;
  }
  std::fprintf(stderr, "usage: bench_allreduce threads | mp | mpi (under mpirun -np 2)\n");
  return 2;
}
