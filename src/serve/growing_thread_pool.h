#pragma once
// The HTTP server's worker pool: starts empty and adds a thread whenever a connection arrives and
// no thread is idle, up to `max_threads`; past that, connections wait in order. httplib's own
// pool creates all its threads at start-up, and the server needs room for every queued request
// (each holds a worker while it waits and streams: 576+ threads), so on a loaded 2-core machine
// the listener took seconds to start and its first requests timed out. Threads, once made, stay
// until shutdown (a server that was busy once is likely to be busy again).
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <httplib.h>

namespace pypto {

class GrowingThreadPool : public httplib::TaskQueue {
 public:
  explicit GrowingThreadPool(size_t max_threads);
  ~GrowingThreadPool() override;

  void enqueue(std::function<void()> fn) override;
  // Runs the jobs already queued, then joins every thread; later enqueues are dropped.
  void shutdown() override;

  size_t num_threads() const;

 private:
  void work();

  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool shutdown_ = false;
};

}  // namespace pypto
