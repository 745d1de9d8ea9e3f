#include "serve/heap_return.h"

#include <malloc.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "core/log.h"

namespace pypto {

size_t heap_free_bytes() { return mallinfo2().fordblks; }

size_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  return n == 2 ? size_t(resident) * size_t(sysconf(_SC_PAGESIZE)) : 0;
}

HeapReturner::HeapReturner(double period_s, size_t threshold_bytes)
    : period_s_(period_s), threshold_bytes_(threshold_bytes) {
  if (period_s_ > 0) thread_ = std::thread([this] { run(); });
}

HeapReturner::~HeapReturner() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool HeapReturner::check_now() {
  std::lock_guard lock(mu_);  // one check at a time (the thread and a caller)
  const size_t free_bytes = heap_free_bytes(), rss = resident_bytes();
  const bool trim = free_bytes > threshold_bytes_ && rss > rss_after_trim_ + threshold_bytes_;
  if (trim) {
    malloc_trim(0);
    rss_after_trim_ = resident_bytes();
    log_debug("heap: returned free arena pages: RSS ", rss >> 20, " -> ", rss_after_trim_ >> 20, " MiB (",
              free_bytes >> 20, " MiB free in the arenas)");
  }
  ++stats_.checks;
  if (trim) ++stats_.trims, stats_.freed_bytes_seen += int64_t(free_bytes);
  return trim;
}

HeapReturnStats HeapReturner::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

void HeapReturner::run() {
  const auto period = std::chrono::microseconds(int64_t(period_s_ * 1e6));
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (cv_.wait_for(lock, period, [this] { return stop_; })) return;
    }
    check_now();
  }
}

}  // namespace pypto
