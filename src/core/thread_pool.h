#pragma once
// A persistent pool of worker threads for the CPU kernels. The caller of parallel_for is thread 0
// and works too, so a pool of N threads starts N - 1 workers. Workers are created once, pinned to
// a core each when a core list is given, and between jobs spin for up to 2 ms on an epoch counter
// (a job in a forward pass follows the previous one within microseconds) before sleeping on it (futex
// via std::atomic::wait), so an op costs no thread start-up and an idle engine burns no CPU.
#include <atomic>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

namespace pypto {

class ThreadPool {
 public:
  // num_threads >= 1. cores: thread i is pinned to cores[i % cores.size()] (empty = no pinning);
  // the calling thread (thread 0) is pinned on its first parallel_for.
  explicit ThreadPool(int num_threads, std::vector<int> cores = {});
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int num_threads() const { return num_threads_; }

  // Splits [0, n) into num_threads contiguous ranges whose boundaries are multiples of `grain`
  // (the last range takes the remainder) and calls fn(begin, end, thread_id) for each non-empty
  // range, thread_id in [0, num_threads). Returns when all calls have returned. The split depends
  // only on n, grain and num_threads, so a kernel's per-element work never depends on timing.
  // Must not be called from inside fn (no nesting) nor from two threads at once.
  template <typename F>
  void parallel_for(int64_t n, F&& fn, int64_t grain = 1) {
    using Fn = std::remove_reference_t<F>;
    run(n, grain, [](void* ctx, int64_t b, int64_t e, int tid) { (*static_cast<Fn*>(ctx))(b, e, tid); },
        const_cast<void*>(static_cast<const void*>(&fn)), Mode::Static);
  }

  // Dynamic variant: [0, n) is cut into chunks of `chunk` elements (the last may be shorter) that
  // threads take in order from a shared counter, calling fn(begin, end, thread_id) once per chunk.
  // On cores shared with other processes a descheduled thread then delays the op by one chunk,
  // not by its whole static share. Which thread runs a chunk varies from run to run, so fn must
  // compute each element independently of the chunking (every kernel here does).
  template <typename F>
  void parallel_for_dynamic(int64_t n, int64_t chunk, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run(n, chunk, [](void* ctx, int64_t b, int64_t e, int tid) { (*static_cast<Fn*>(ctx))(b, e, tid); },
        const_cast<void*>(static_cast<const void*>(&fn)), Mode::Dynamic);
  }

  // Guided variant: chunks shrink as the work runs out. A thread takes max(unit, remaining / (2 ·
  // num_threads)) elements rounded up to a multiple of `unit` (the last chunk may be shorter), so
  // the first chunks are long (few hand-outs, long streams through memory) and the last ones short:
  // the threads finish within about one `unit` of each other instead of one fixed chunk. Like
  // parallel_for_dynamic, which thread runs which elements varies from run to run.
  template <typename F>
  void parallel_for_guided(int64_t n, int64_t unit, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    run(n, unit, [](void* ctx, int64_t b, int64_t e, int tid) { (*static_cast<Fn*>(ctx))(b, e, tid); },
        const_cast<void*>(static_cast<const void*>(&fn)), Mode::Guided);
  }

  // Between jobs: each worker, while it waits for the next job, prefetches the first `bytes` of
  // each of `n` (<= 4) streams into L2, once per call, and stops as soon as a job arrives. For the
  // caller to start the memory streams of the next op while it does serial work of its own.
  // A hint: it changes no result.
  void prefetch_while_idle(const void* const* streams, int n, int64_t bytes);
  // The range thread `tid` gets for (n, grain): exposed so kernels and tests can reason about it.
  void range_of(int64_t n, int64_t grain, int tid, int64_t* begin, int64_t* end) const;

 private:
  using Call = void (*)(void*, int64_t, int64_t, int);
  enum class Mode { Static, Dynamic, Guided };
  void run(int64_t n, int64_t grain, Call call, void* ctx, Mode mode);
  void worker_main(int tid);
  void run_share(int tid);

  int num_threads_;
  std::vector<int> cores_;
  std::vector<std::thread> workers_;
  bool caller_pinned_ = false;
  bool oversubscribed_ = false;  // more threads than usable cores: spin-waits also yield

  // The current job (written by the caller before the epoch is bumped).
  Call call_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0, grain_ = 1;
  Mode mode_ = Mode::Static;
  // Dynamic jobs: the next chunk to hand out; guided jobs: the first element not handed out.
  alignas(64) std::atomic<int64_t> next_chunk_{0};

  alignas(64) std::atomic<uint64_t> epoch_{0};   // bumped once per job (and at shutdown)
  alignas(64) std::atomic<int> remaining_{0};    // workers still running the current job
  alignas(64) std::atomic<bool> busy_{false};    // a parallel_for is in progress
  bool stop_ = false;
  // prefetch_while_idle's streams (stored before pf_seq_ is bumped; a worker may read a mix of
  // two calls' fields, harmless for a hint).
  std::atomic<const char*> pf_[4] = {};
  std::atomic<int> pf_n_{0};
  std::atomic<int64_t> pf_bytes_{0};
  alignas(64) std::atomic<uint64_t> pf_seq_{0};
  void idle_prefetch(uint64_t epoch);
};

// Pins the calling thread to one core; returns false (and changes nothing) if that fails.
bool pin_current_thread(int core);

}  // namespace pypto
