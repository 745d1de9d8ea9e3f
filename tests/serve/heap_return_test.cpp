// The server's page returner (serve/heap_return.h): freed pages that glibc keeps in the middle of
// a heap are given back by a check once they pass the threshold, a heap already trimmed is not
// walked again until it grows, and a check below the threshold leaves the heap alone.
#include <gtest/gtest.h>
#include <malloc.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "serve/heap_return.h"

namespace pypto {
namespace {

constexpr size_t kMiB = size_t(1) << 20;

// 64 blocks of 1 MiB written (resident), then freed under a small block that pins the heap's top,
// so glibc's own trim at free (top of the heap only) cannot return them.
void leave_free_pages_in_heap() {
  std::vector<char*> blocks;
  for (int i = 0; i < 64; ++i) {
    blocks.push_back(static_cast<char*>(std::malloc(kMiB)));
    std::memset(blocks.back(), 1, kMiB);
  }
  static char* pin = static_cast<char*>(std::malloc(64));  // stays: the heap's top is in use
  pin[0] = 1;
  for (char* b : blocks) std::free(b);
}

TEST(HeapReturn, TrimGivesBackFreedPagesOnceThenWaitsForGrowth) {
  // Fixed thresholds: 1 MiB blocks come from the heap (not mmap), and free() does not trim.
  ASSERT_EQ(mallopt(M_MMAP_THRESHOLD, int(64 * kMiB)), 1);
  ASSERT_EQ(mallopt(M_TRIM_THRESHOLD, int(1024 * kMiB)), 1);
  HeapReturner h(0, 32 * kMiB);  // no thread: checks only when called
  h.check_now();                 // whatever the test process held so far
  const int64_t trims0 = h.stats().trims;
  leave_free_pages_in_heap();
  ASSERT_GE(heap_free_bytes(), 64 * kMiB);
  const size_t before = resident_bytes();
  ASSERT_GT(before, 64 * kMiB);
  EXPECT_TRUE(h.check_now());
  const size_t after = resident_bytes();
  EXPECT_LT(after + 48 * kMiB, before) << "RSS " << (before >> 20) << " -> " << (after >> 20) << " MiB";
  // The free bytes are still in the bins (now without pages): no second walk until RSS grows.
  EXPECT_FALSE(h.check_now());
  EXPECT_EQ(h.stats().trims, trims0 + 1);
}

TEST(HeapReturn, BelowTheThresholdNothingIsTrimmed) {
  HeapReturner h(0, size_t(1) << 40);
  EXPECT_FALSE(h.check_now());
  EXPECT_EQ(h.stats().trims, 0);
  EXPECT_EQ(h.stats().checks, 1);
}

TEST(HeapReturn, TheThreadChecksEachPeriodAndStops) {
  HeapReturner h(0.01, size_t(1) << 40);
  for (int i = 0; i < 2000 && h.stats().checks < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_GE(h.stats().checks, 3);
}  // the destructor joins: a hang here fails the test by its timeout

}  // namespace
}  // namespace pypto
