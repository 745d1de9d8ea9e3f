#include "serve/growing_thread_pool.h"

#include "core/error.h"

namespace pypto {

GrowingThreadPool::GrowingThreadPool(size_t max_threads) : max_threads_(max_threads) {
  PYPTO_ASSERT(max_threads >= 1, "a pool needs at least one thread");
}

GrowingThreadPool::~GrowingThreadPool() { shutdown(); }

void GrowingThreadPool::enqueue(std::function<void()> fn) {
  std::lock_guard lock(mu_);
  if (shutdown_) return;
  jobs_.push_back(std::move(fn));
  // A thread is added only when every existing one is busy, so a quiet server keeps few.
  if (idle_ < jobs_.size() && threads_.size() < max_threads_) threads_.emplace_back([this] { work(); });
  cv_.notify_one();
}

void GrowingThreadPool::shutdown() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
    threads.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : threads) t.join();
}

size_t GrowingThreadPool::num_threads() const {
  std::lock_guard lock(mu_);
  return threads_.size();
}

void GrowingThreadPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [this] { return shutdown_ || !jobs_.empty(); });
    --idle_;
    if (jobs_.empty()) return;  // shut down and nothing left to run
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    lock.lock();
  }
}

}  // namespace pypto
