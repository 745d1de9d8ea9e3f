// ThreadPool and Arena (src/core), tested here because the kernels are their users.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <cstring>
#include <set>
#include <vector>

#include "core/arena.h"
#include "core/thread_pool.h"

namespace pypto {
namespace {

TEST(ThreadPool, CoversRangeExactlyOnceWithGrainAlignedSplits) {
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 2, 7, 16, 100, 1001}) {
      for (int64_t grain : {1, 4, 16}) {
        std::vector<std::atomic<int>> hits(n);
        std::vector<int> calls(threads, 0);
        pool.parallel_for(
            n,
            [&](int64_t b, int64_t e, int tid) {
              ASSERT_LT(b, e);
              ASSERT_TRUE(b % grain == 0) << "range start " << b << " grain " << grain;
              calls[tid]++;
              for (int64_t i = b; i < e; ++i) hits[i]++;
            },
            grain);
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " i=" << i;
        for (int t = 0; t < threads; ++t) ASSERT_LE(calls[t], 1);
      }
    }
  }
}

TEST(ThreadPool, DynamicChunksCoverRangeExactlyOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 5, 64, 1001})
      for (int64_t chunk : {1, 7, 64, 5000}) {
        std::vector<std::atomic<int>> hits(n);
        pool.parallel_for_dynamic(n, chunk, [&](int64_t b, int64_t e, int tid) {
          ASSERT_TRUE(b % chunk == 0 && e - b <= chunk && tid < threads);
          for (int64_t i = b; i < e; ++i) hits[i]++;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " chunk=" << chunk;
      }
  }
}

// Guided chunks: every element once, every chunk starts on a unit boundary and is whole units
// (but the last), and the chunks shrink (a later-starting chunk is never longer than an earlier one
// of the same job, within one unit of rounding).
TEST(ThreadPool, GuidedChunksCoverRangeExactlyOnceAndShrink) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {1, 5, 64, 1001, 6144})
      for (int64_t unit : {1, 7, 64, 5000}) {
        std::vector<std::atomic<int>> hits(n);
        std::mutex mu;
        std::vector<std::pair<int64_t, int64_t>> chunks;
        pool.parallel_for_guided(n, unit, [&](int64_t b, int64_t e, int tid) {
          ASSERT_TRUE(b % unit == 0 && (e == n || (e - b) % unit == 0) && e > b && tid < threads);
          for (int64_t i = b; i < e; ++i) hits[i]++;
          std::lock_guard<std::mutex> lock(mu);
          chunks.push_back({b, e - b});
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " unit=" << unit;
        std::sort(chunks.begin(), chunks.end());
        for (size_t c = 1; c < chunks.size(); ++c) ASSERT_LE(chunks[c].second, chunks[c - 1].second + unit);
        // The first chunk is about n / (2 · threads) (neither one chunk per thread nor unit-sized
        // ones throughout), the last one a single unit.
        if (threads > 1 && n >= 64 * unit) {
          ASSERT_LE(chunks[0].second, n / (2 * threads) + unit);
          ASSERT_GE(chunks[0].second, n / (2 * threads) - unit);
          ASSERT_LE(chunks.back().second, unit);
        }
      }
  }
}

TEST(ThreadPool, ManyJobsBackToBack) {
  ThreadPool pool(3);
  std::atomic<int64_t> sum{0};
  for (int it = 0; it < 2000; ++it)
    pool.parallel_for(3, [&](int64_t b, int64_t e, int) { sum += e - b; });
  EXPECT_EQ(sum.load(), 6000);
}

// A worker prefetching between jobs must stop when the next job arrives: here each posted prefetch
// covers 64 GiB (hours of prefetch instructions if it ran to the end, so a worker that does not
// stop hangs the test), and every job needs both threads (static split).
TEST(ThreadPool, IdlePrefetchStopsWhenAJobArrives) {
  ThreadPool pool(2);
  std::vector<uint8_t> buf(4096);
  const void* streams[2] = {buf.data(), buf.data() + 2048};
  for (int job = 0; job < 200; ++job) {
    pool.prefetch_while_idle(streams, 2, int64_t(64) << 30);
    std::atomic<int> ran[2] = {0, 0};
    pool.parallel_for(2, [&](int64_t b, int64_t e, int tid) {
      ASSERT_EQ(e - b, 1);
      ran[tid]++;
    });
    ASSERT_EQ(ran[0].load(), 1) << "job " << job;
    ASSERT_EQ(ran[1].load(), 1) << "job " << job;
  }
}

TEST(ThreadPool, RangeOfIsBalanced) {
  ThreadPool pool(4);
  int64_t b, e;
  std::set<int64_t> sizes;
  for (int t = 0; t < 4; ++t) {
    pool.range_of(103, 1, t, &b, &e);
    sizes.insert(e - b);
  }
  EXPECT_LE(*sizes.rbegin() - *sizes.begin(), 1);
}

TEST(ThreadPool, PinnedPoolRuns) {
  ThreadPool pool(2, {0});
  std::atomic<int> n{0};
  pool.parallel_for(2, [&](int64_t, int64_t, int) { n++; });
  EXPECT_EQ(n.load(), 2);
}

TEST(Arena, BumpAllocatesAlignedAndResets) {
  Arena arena(1 << 16);
  auto* a = arena.alloc_array<float>(10);
  auto* b = arena.alloc_array<float>(3, 256);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 256, 0u);
  EXPECT_GT(b, a);
  arena.reset();
  EXPECT_EQ(arena.used(), 0u);
  EXPECT_EQ(arena.alloc_array<float>(10), a);  // same memory next step
}

TEST(Arena, SpillsThenGrowsToHighWater) {
  Arena arena(4096);
  for (int i = 0; i < 10; ++i) std::memset(arena.alloc(3000), i, 3000);  // spills past 4 KiB
  EXPECT_GE(arena.high_water(), 30000u);
  arena.reset();
  EXPECT_GE(arena.capacity(), 30000u);
  EXPECT_EQ(arena.grow_count(), 1u);
  for (int i = 0; i < 10; ++i) arena.alloc(3000);
  arena.reset();
  EXPECT_EQ(arena.grow_count(), 1u);  // steady state: no more growth
}

}  // namespace
}  // namespace pypto
