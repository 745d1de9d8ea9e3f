#pragma once
// Gives the allocator's free pages back to the system while the server runs. Request bodies,
// parsed JSON and rendered prompts are transient multi-MiB allocations made on many HTTP threads;
// glibc serves them from per-thread arenas (up to 8 per core) and keeps their pages once they are
// freed, so a server that once took a burst of large bodies stayed that much larger (the soak
// measured +250 MiB over 6 minutes on the tiny model). A background thread looks at the arenas'
// free bytes and the resident size every `period`, and calls malloc_trim(0) (which returns free
// pages from every arena, also from the middle of a heap, not only its top) when both the free
// bytes and the growth of the resident size since the last trim pass `threshold_bytes`: memory in
// use (KV pages touched for the first time) grows RSS without free bytes and is left alone, and a
// heap already trimmed is not walked again until it grows. The hot paths (the engine's steps, the
// kernels) are unchanged: no allocation goes through here.
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>

namespace pypto {

struct HeapReturnStats {
  int64_t checks = 0;          // looks at the arenas
  int64_t trims = 0;           // malloc_trim calls
  int64_t freed_bytes_seen = 0;  // free arena bytes found before each trim, summed
};

class HeapReturner {
 public:
  HeapReturner(double period_s, size_t threshold_bytes);
  ~HeapReturner();  // stops and joins
  HeapReturner(const HeapReturner&) = delete;
  HeapReturner& operator=(const HeapReturner&) = delete;

  // One check now (what the thread does each period): trims when the arenas hold more than the
  // threshold free and RSS grew by more than it since the last trim. Returns true when it trimmed.
  bool check_now();
  HeapReturnStats stats() const;

 private:
  void run();

  const double period_s_;
  const size_t threshold_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  HeapReturnStats stats_;
  size_t rss_after_trim_ = 0;  // resident bytes after the last trim (0: none yet)
  std::thread thread_;
};

// Free bytes the allocator holds in its arenas (mallinfo2's fordblks: chunks in bins, not
// counting the mmapped ones, which go back to the system on free).
size_t heap_free_bytes();
// This process's resident bytes (/proc/self/statm); 0 when it cannot be read.
size_t resident_bytes();

}  // namespace pypto
