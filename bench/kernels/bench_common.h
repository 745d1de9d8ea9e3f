#pragma once
// Shared by the kernel benchmarks: thread count, the measured memory bandwidth bound and the
// measured compute peaks (each measured once per process, on first use).
#include <cstddef>
#include <cstdint>

namespace pypto::bench {

// Threads for every benchmark: $PYPTO_BENCH_THREADS or all usable cores.
int bench_threads();

struct Rate {
  double median = 0, best = 0;  // over the repetitions, per second
};
// Read-only streaming bandwidth over `bytes` with bench_threads() pinned threads, bytes/s.
Rate read_bandwidth(size_t bytes, int reps);
// STREAM triad a = b + s·c over three arrays of `bytes_each`, counting 3 × bytes_each per pass.
Rate triad_bandwidth(size_t bytes_each, int reps);
// Read-only bandwidth over `bytes` read as runs of `run` bytes (a multiple of 32) in a shuffled
// order, each thread taking runs in turn; before each run, the first `prefetch_lines` 64-byte lines
// of the thread's next run are prefetched into L2. The access pattern of decode attention over a
// paged KV cache (one head's K or V rows of a block: 4 KiB at Qwen3's shapes).
Rate run_read_bandwidth(size_t bytes, size_t run, int prefetch_lines, int reps);
// The best read bandwidth over 1 GiB (7 passes), measured once and cached (bytes/s): the bound a
// memory-bound kernel is compared with.
double bandwidth_bound();

// Peak flops/s (2 per multiply-add) on bench_threads() threads: AVX512_BF16 dot products
// (vdpbf16ps) and f32 FMA (vfmadd231ps zmm). 0 when the CPU lacks them.
double bf16_peak_flops();
double f32_peak_flops();
// AMX tile products on bench_threads() threads: TDPBF16PS (flops/s) and TDPBUSD (u8 × s8, ops/s,
// 2 per multiply-add). 0 where AMX is not usable (core/cpu_features.h amx_usable()).
double amx_bf16_peak_flops();
double amx_int8_peak_ops();
// The peak of the matrix products a CPU backend with `parts` bf16 parts of x runs (parts 0 =
// f32 FMA; 1 = medium, 2 = high: the bf16-dot or AMX peak divided by the parts), by its name()
// ("…amx…" = AMX tiles). flops/s of useful multiply-adds.
double matrix_peak_flops(const char* backend_name);
}  // namespace pypto::bench
