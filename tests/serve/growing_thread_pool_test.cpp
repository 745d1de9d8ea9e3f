// The HTTP worker pool (serve/growing_thread_pool.h): it starts with no thread, adds one only
// when every thread is busy, never passes its maximum (jobs past it wait and still run), and
// runs what is queued before shutdown returns.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "serve/growing_thread_pool.h"

namespace pypto {
namespace {

// Waits up to 20 s for `done()`.
template <typename F>
bool eventually(F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

TEST(GrowingThreadPool, StartsEmptyAndReusesAnIdleThread) {
  GrowingThreadPool pool(64);
  EXPECT_EQ(pool.num_threads(), 0u);
  std::atomic<int> ran{0};
  for (int i = 0; i < 20; ++i) {
    pool.enqueue([&] { ran.fetch_add(1); });
    ASSERT_TRUE(eventually([&] { return ran.load() == i + 1; }));
    // Give the worker time to go back to waiting, so the next job finds it idle.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_LE(pool.num_threads(), 2u) << "sequential jobs should not need a thread each";
}

TEST(GrowingThreadPool, GrowsToItsMaximumAndQueuesTheRest) {
  GrowingThreadPool pool(3);
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  std::atomic<int> running{0}, finished{0};
  for (int i = 0; i < 7; ++i) {
    pool.enqueue([&] {
      running.fetch_add(1);
      std::unique_lock lock(mu);
      cv.wait(lock, [&] { return release; });
      finished.fetch_add(1);
    });
  }
  ASSERT_TRUE(eventually([&] { return running.load() == 3; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(running.load(), 3) << "more jobs ran at once than the maximum of threads";
  EXPECT_EQ(pool.num_threads(), 3u);
  {
    std::lock_guard lock(mu);
    release = true;
  }
  cv.notify_all();
  ASSERT_TRUE(eventually([&] { return finished.load() == 7; }));
}

TEST(GrowingThreadPool, ShutdownRunsWhatIsQueuedThenRefusesMore) {
  std::atomic<int> ran{0};
  GrowingThreadPool pool(1);
  for (int i = 0; i < 5; ++i)
    pool.enqueue([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      ran.fetch_add(1);
    });
  pool.shutdown();
  EXPECT_EQ(ran.load(), 5);
  pool.enqueue([&] { ran.fetch_add(100); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(ran.load(), 5);
}

}  // namespace
}  // namespace pypto
