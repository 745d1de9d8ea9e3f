#include "core/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>

#include "core/cpu_features.h"
#include "core/error.h"

namespace pypto {
namespace {

// How long an idle worker (or the caller waiting for workers) spins before sleeping. Ops of one
// forward pass follow each other within a few microseconds; a step boundary may take longer. On a
// VM whose host is shared, a thread of an op can be descheduled for a few hundred microseconds;
// if the other thread has gone to sleep meanwhile, waking it costs as much again (a halted vCPU
// waits for the host). Counted on 2-thread int4 decode: with 200 µs of spin 15 % of the ops found
// the worker asleep (woken ~340 µs late on average), with 2 ms none. Idle cost: 2 ms of one core
// after the engine's last step.
constexpr auto kSpinTime = std::chrono::microseconds(2000);

// One step of a spin-wait. A pool with more threads than usable cores also yields the core after a
// few spins, so the descheduled thread it waits for can run instead of it burning a time slice
// (measured: ~750 us per job for 3 threads on 2 cores without, ~50 us with). A pool that fits
// its cores never yields: yielding to unrelated processes costs tens of microseconds per job.
inline void spin_step(int spins, bool oversubscribed) {
  __builtin_ia32_pause();
  if (oversubscribed && spins > 256) sched_yield();
}

thread_local bool t_inside_job = false;

}  // namespace

bool pin_current_thread(int core) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(core, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

ThreadPool::ThreadPool(int num_threads, std::vector<int> cores)
    : num_threads_(num_threads), cores_(std::move(cores)) {
  if (num_threads < 1) fail("thread pool needs at least 1 thread, got ", num_threads);
  // More threads than cores to run them on (all usable cores, or the distinct cores pinned to).
  std::vector<int> distinct = cores_;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  oversubscribed_ = num_threads > (cores_.empty() ? cpu_count() : static_cast<int>(distinct.size()));
  workers_.reserve(num_threads - 1);
  for (int tid = 1; tid < num_threads; ++tid) workers_.emplace_back([this, tid] { worker_main(tid); });
}

ThreadPool::~ThreadPool() {
  stop_ = true;
  epoch_.fetch_add(1, std::memory_order_release);
  epoch_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::range_of(int64_t n, int64_t grain, int tid, int64_t* begin, int64_t* end) const {
  // Units of `grain` elements, spread as evenly as possible: the first (units % T) threads get
  // one unit more.
  int64_t units = (n + grain - 1) / grain;
  int64_t per = units / num_threads_, extra = units % num_threads_;
  int64_t u0 = tid * per + (tid < extra ? tid : extra);
  int64_t u1 = u0 + per + (tid < extra ? 1 : 0);
  *begin = u0 * grain < n ? u0 * grain : n;
  *end = u1 * grain < n ? u1 * grain : n;
}

void ThreadPool::run_share(int tid) {
  if (mode_ == Mode::Guided) {
    const int64_t split = 2 * int64_t(num_threads_);
    for (int64_t b = next_chunk_.load(std::memory_order_relaxed);;) {
      if (b >= n_) return;
      const int64_t want = (n_ - b + split - 1) / split;
      const int64_t size = (want + grain_ - 1) / grain_ * grain_;
      if (!next_chunk_.compare_exchange_weak(b, b + size, std::memory_order_relaxed)) continue;  // b reloaded
      call_(ctx_, b, b + size < n_ ? b + size : n_, tid);
      b = next_chunk_.load(std::memory_order_relaxed);
    }
  }
  if (mode_ == Mode::Dynamic) {
    for (;;) {
      int64_t b = next_chunk_.fetch_add(1, std::memory_order_relaxed) * grain_;
      if (b >= n_) return;
      call_(ctx_, b, b + grain_ < n_ ? b + grain_ : n_, tid);
    }
  }
  int64_t b, e;
  range_of(n_, grain_, tid, &b, &e);
  if (b < e) call_(ctx_, b, e, tid);
}

void ThreadPool::run(int64_t n, int64_t grain, Call call, void* ctx, Mode mode) {
  PYPTO_ASSERT(!t_inside_job, "nested parallel_for");
  PYPTO_ASSERT(grain >= 1, "grain ", grain);
  if (n <= 0) return;
  bool was_busy = busy_.exchange(true, std::memory_order_acquire);
  PYPTO_ASSERT(!was_busy, "parallel_for called from two threads at once");
  if (!caller_pinned_) {
    if (!cores_.empty()) pin_current_thread(cores_[0]);
    caller_pinned_ = true;
  }
  call_ = call;
  ctx_ = ctx;
  n_ = n;
  grain_ = grain;
  mode_ = mode;
  next_chunk_.store(0, std::memory_order_relaxed);
  t_inside_job = true;
  if (num_threads_ == 1 || n <= grain) {
    if (mode != Mode::Static && n > grain) {
      run_share(0);  // one thread: all chunks in order
    } else {
      call(ctx, 0, n, 0);  // one range: no need to wake anyone
    }
  } else {
    remaining_.store(num_threads_ - 1, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_release);
    epoch_.notify_all();
    run_share(0);
    // Wait for the workers: spin first, then sleep on `remaining_`.
    auto t0 = std::chrono::steady_clock::now();
    int spins = 0;
    for (int r; (r = remaining_.load(std::memory_order_acquire)) != 0;) {
      if (++spins < 64 || std::chrono::steady_clock::now() - t0 < kSpinTime)
        spin_step(spins, oversubscribed_);
      else
        remaining_.wait(r, std::memory_order_acquire);
    }
  }
  t_inside_job = false;
  busy_.store(false, std::memory_order_release);
}

void ThreadPool::prefetch_while_idle(const void* const* streams, int n, int64_t bytes) {
  for (int i = 0; i < n && i < 4; ++i) pf_[i].store(static_cast<const char*>(streams[i]), std::memory_order_relaxed);
  pf_n_.store(n < 4 ? n : 4, std::memory_order_relaxed);
  pf_bytes_.store(bytes, std::memory_order_relaxed);
  pf_seq_.fetch_add(1, std::memory_order_release);
}

// Runs on a worker waiting for the job after `epoch`: 16 lines per stream at a time, then checks
// whether that job has arrived.
void ThreadPool::idle_prefetch(uint64_t epoch) {
  const int n = pf_n_.load(std::memory_order_relaxed);
  const int64_t bytes = pf_bytes_.load(std::memory_order_relaxed);
  const char* streams[4];
  for (int i = 0; i < n; ++i) streams[i] = pf_[i].load(std::memory_order_relaxed);
  for (int64_t off = 0; off < bytes; off += 16 * 64) {
    if (epoch_.load(std::memory_order_relaxed) != epoch) return;
    for (int i = 0; i < n; ++i)
      for (int l = 0; l < 16; ++l) __builtin_prefetch(streams[i] + off + 64 * l, 0, 2);
  }
}

void ThreadPool::worker_main(int tid) {
  if (!cores_.empty()) pin_current_thread(cores_[tid % cores_.size()]);
  t_inside_job = true;  // a worker never calls parallel_for itself
  uint64_t seen = 0, pf_seen = 0;
  for (;;) {
    auto t0 = std::chrono::steady_clock::now();
    int spins = 0;
    uint64_t e;
    while ((e = epoch_.load(std::memory_order_acquire)) == seen) {
      if (const uint64_t ps = pf_seq_.load(std::memory_order_acquire); ps != pf_seen) {
        pf_seen = ps;
        idle_prefetch(seen);
        continue;
      }
      if (++spins < 64 || std::chrono::steady_clock::now() - t0 < kSpinTime)
        spin_step(spins, oversubscribed_);
      else
        epoch_.wait(seen, std::memory_order_acquire);
    }
    seen = e;
    if (stop_) return;
    run_share(tid);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_one();
  }
}

}  // namespace pypto
