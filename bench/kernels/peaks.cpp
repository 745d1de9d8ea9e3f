// Compute peaks on all benchmark threads, measured once per process: AVX512_BF16 dot products,
// f32 FMA (AVX-512, or AVX2 where that is all the CPU has) and AMX tile products (bf16 and int8), the bounds the kernel and model
// benchmarks report their % against (bench_common.h, peaks.h).
#include "peaks.h"

#include <algorithm>
#include <time.h>

#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include "bench_common.h"
#include "core/cpu_features.h"
#include "core/thread_pool.h"
#include "kernels/cpu/peak_loops.h"

namespace pypto::bench {
namespace {

bool has_avx512_bf16() {
  const CpuFeatures& f = cpu_features();
  return f.avx512f && f.avx512_bf16;
}

double thread_cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// flops/s of `loop` run concurrently on every thread (median of 5 passes). On a machine shared
// with other processes the wall-clock rate undercounts, so the rate per thread-CPU-second times
// the thread count (what the cores do while they are ours) is kept too.
Peak peak_of(int64_t (*loop)(int64_t), int64_t iters) {
  const int nt = bench_threads();
  std::vector<int> cores(nt);
  std::iota(cores.begin(), cores.end(), 0);
  ThreadPool pool(nt, cores);
  std::vector<double> rates, cpu_rates;
  for (int r = 0; r < 5; ++r) {
    std::vector<int64_t> macs(nt);
    std::vector<double> cpu(nt);
    auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(nt, [&](int64_t b, int64_t e, int tid) {
      double c0 = thread_cpu_s();
      macs[tid] = loop(iters);
      cpu[tid] = thread_cpu_s() - c0;
    });
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rates.push_back(2.0 * std::accumulate(macs.begin(), macs.end(), int64_t(0)) / s);
    cpu_rates.push_back(2.0 * macs[0] / cpu[0] * nt);
  }
  std::sort(rates.begin(), rates.end());
  std::sort(cpu_rates.begin(), cpu_rates.end());
  return {rates[rates.size() / 2], cpu_rates[cpu_rates.size() / 2]};
}

}  // namespace

Peak bf16_peak() {
  static Peak v = has_avx512_bf16() ? peak_of(cpu::bf16_dot_loop, 4'000'000) : Peak{};
  return v;
}
Peak f32_peak() {
  static Peak v = has_avx512_bf16()           ? peak_of(cpu::f32_fma_loop, 4'000'000)
                  : cpu_isa() == Isa::Avx2     ? peak_of(cpu::f32_fma_loop_avx2, 4'000'000)
                                               : Peak{};
  return v;
}
Peak amx_bf16_peak() {
  static Peak v = amx_usable() ? peak_of(cpu::amx_bf16_loop, 200'000) : Peak{};
  return v;
}
Peak amx_int8_peak() {
  static Peak v = amx_usable() ? peak_of(cpu::amx_int8_loop, 200'000) : Peak{};
  return v;
}

// The uncontended estimate: the figure the cores reach, which is what a kernel's % is relative to.
double bf16_peak_flops() { return bf16_peak().per_cpu; }
double f32_peak_flops() { return f32_peak().per_cpu; }
double amx_bf16_peak_flops() { return amx_bf16_peak().per_cpu; }
double amx_int8_peak_ops() { return amx_int8_peak().per_cpu; }

double matrix_peak_flops(const char* backend_name) {
  const std::string n = backend_name;
  const double parts = n.find("bf16x2act") != std::string::npos ? 2 : 1;
  if (n.find("bf16") == std::string::npos) return f32_peak_flops();
  return (n.find("amx") != std::string::npos ? amx_bf16_peak_flops() : bf16_peak_flops()) / parts;
}

}  // namespace pypto::bench
