// bench_kernels entry point: prints the machine and thread setup, then runs the benchmarks
// (each prints its line as it completes).
#include <benchmark/benchmark.h>

#include <cstdio>

#include "bench_common.h"
#include "core/cpu_features.h"

int main(int argc, char** argv) {
  std::fprintf(stderr, "bench_kernels: isa %s, %d threads (PYPTO_BENCH_THREADS), %d usable cores\n",
               pypto::isa_name(pypto::cpu_isa()), pypto::bench::bench_threads(), pypto::cpu_count());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
