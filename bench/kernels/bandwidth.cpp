// Memory bandwidth: read-only sum and STREAM triad, all threads, pinned one per core. Compiled with
// AVX2 (see CMakeLists.txt); plain loops the compiler vectorises (integer sum: no reassociation
// issue).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/cpu_features.h"
#include "core/memory.h"
#include "core/thread_pool.h"
#include "bench_common.h"

namespace pypto::bench {

int bench_threads() {
  static int n = [] {
    const char* e = std::getenv("PYPTO_BENCH_THREADS");
    return e && std::atoi(e) > 0 ? std::atoi(e) : cpu_count();
  }();
  return n;
}

namespace {
std::vector<int> first_cores(int n) {
  std::vector<int> c(n);
  std::iota(c.begin(), c.end(), 0);
  return c;
}
Rate summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.back()};
}
double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
// p[i] = i for i < n, written by the pool's threads in 4096-word chunks (pages first touched by
// the threads that read them, where the reads split the same way).
void fill_words(ThreadPool& pool, uint64_t* p, size_t n) {
  pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) p[i] = static_cast<uint64_t>(i);
  }, 4096);
}
// Σ q[0, n) in four running sums (independent adds: the loads, not the adds, set the pace).
uint64_t sum_words(const uint64_t* q, size_t n) {
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += q[i];
    s1 += q[i + 1];
    s2 += q[i + 2];
    s3 += q[i + 3];
  }
  for (; i < n; ++i) s0 += q[i];
  return s0 + s1 + s2 + s3;
}
}  // namespace

Rate read_bandwidth(size_t bytes, int reps) {
  const int nt = bench_threads();
  ThreadPool pool(nt, first_cores(nt));
  AlignedBuffer buf(bytes);
  const size_t n = bytes / 8;
  auto* p = reinterpret_cast<uint64_t*>(buf.data());
  fill_words(pool, p, n);  // first touch by the reading thread
  std::vector<uint64_t> sink(nt * 8);
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_s();
    pool.parallel_for(n, [&](int64_t b, int64_t e, int tid) { sink[tid * 8] = sum_words(p + b, size_t(e - b)); }, 4096);
    rates.push_back(static_cast<double>(n * 8) / (now_s() - t0));
  }
  volatile uint64_t keep = sink[0];
  (void)keep;
  return summarize(rates);
}

Rate triad_bandwidth(size_t bytes_each, int reps) {
  const int nt = bench_threads();
  ThreadPool pool(nt, first_cores(nt));
  AlignedBuffer ab(bytes_each), bb(bytes_each), cb(bytes_each);
  const size_t n = bytes_each / 4;
  auto* a = reinterpret_cast<float*>(ab.data());
  auto* b = reinterpret_cast<float*>(bb.data());
  auto* c = reinterpret_cast<float*>(cb.data());
  pool.parallel_for(n, [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo; i < hi; ++i) a[i] = 0, b[i] = 1, c[i] = 2;
  }, 4096);
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_s();
    pool.parallel_for(n, [&](int64_t lo, int64_t hi, int) {
      const float s = 3.0f;
      for (int64_t i = lo; i < hi; ++i) a[i] = b[i] + s * c[i];
    }, 4096);
    rates.push_back(3.0 * static_cast<double>(bytes_each) / (now_s() - t0));
  }
  return summarize(rates);
}

Rate run_read_bandwidth(size_t bytes, size_t run, int prefetch_lines, int reps) {
  const int nt = bench_threads();
  ThreadPool pool(nt, first_cores(nt));
  AlignedBuffer buf(bytes);
  const int64_t runs = static_cast<int64_t>(bytes / run);
  auto* p = reinterpret_cast<uint64_t*>(buf.data());
  const size_t words = run / 8;
  // Runs in a fixed shuffled order (a paged KV cache's blocks after a while of serving).
  std::vector<int64_t> order(runs);
  std::iota(order.begin(), order.end(), 0);
  uint64_t x = 88172645463325252ull;  // xorshift: the same order on every machine
  for (int64_t i = runs - 1; i > 0; --i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::swap(order[i], order[static_cast<int64_t>(x % static_cast<uint64_t>(i + 1))]);
  }
  fill_words(pool, p, bytes / 8);
  std::vector<uint64_t> sink(nt * 8);
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) {
    double t0 = now_s();
    pool.parallel_for(runs, [&](int64_t b, int64_t e, int tid) {
      uint64_t sum = 0;
      for (int64_t k = b; k < e; ++k) {
        if (prefetch_lines > 0 && k + 1 < e) {  // the next run's first lines, into L2
          const char* next = reinterpret_cast<const char*>(p + order[k + 1] * words);
          for (int l = 0; l < prefetch_lines && size_t(l) * 64 < run; ++l) _mm_prefetch(next + 64 * l, _MM_HINT_T1);
        }
        sum += sum_words(p + order[k] * words, words);
      }
      sink[tid * 8] = sum;
    }, 16);
    rates.push_back(static_cast<double>(runs) * static_cast<double>(run) / (now_s() - t0));
  }
  volatile uint64_t keep = sink[0];
  (void)keep;
  return summarize(rates);
}

double bandwidth_bound() {
  static double bw = read_bandwidth(size_t(1) << 30, 7).best;
  return bw;
}

}  // namespace pypto::bench
