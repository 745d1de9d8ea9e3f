// The in-process shared-memory communicator: all_reduce_sum equals the rank-order sum bitwise on
// every rank, all_gather concatenates in rank order, gather_columns places each rank's column
// block (uneven widths, any root) into the root's rows and leaves the other ranks alone, and repeated collectives of varying sizes
// (including sizes that are not multiples of a cache line, and n < size) do not mix rounds.
#include <gtest/gtest.h>

#include <random>
#include <thread>
#include <vector>

#include "core/error.h"
#include "parallel/shm_communicator.h"

namespace pypto {
namespace {

// Runs fn(rank, comm) on `size` threads, one communicator each.
template <typename F>
void on_ranks(int size, F fn) {
  auto comms = make_shm_communicators(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { fn(r, *comms[size_t(r)]); });
  for (auto& t : threads) t.join();
}

std::vector<float> values(int rank, int round, int64_t n) {
  std::mt19937 rng(uint32_t(rank * 1000 + round));
  std::uniform_real_distribution<float> d(-100.f, 100.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

TEST(ShmCommunicator, AllReduceIsTheRankOrderSumOnEveryRank) {
  for (int size : {1, 2, 3, 4}) {
    const int64_t sizes[] = {1, 3, 16, 17, 1000, 4099};
    // Expected: x_0 + x_1 + ... in rank order, in float, as the contract says.
    std::vector<std::vector<std::vector<float>>> result(static_cast<size_t>(size));
    on_ranks(size, [&](int r, Communicator& c) {
      EXPECT_EQ(c.rank(), r);
      EXPECT_EQ(c.size(), size);
      for (int round = 0; round < 6; ++round) {
        std::vector<float> x = values(r, round, sizes[round]);
        c.all_reduce_sum(x.data(), int64_t(x.size()));
        result[size_t(r)].push_back(x);
      }
    });
    for (int round = 0; round < 6; ++round) {
      std::vector<float> want = values(0, round, sizes[round]);
      for (int r = 1; r < size; ++r) {
        std::vector<float> v = values(r, round, sizes[round]);
        for (size_t i = 0; i < want.size(); ++i) want[i] += v[i];
      }
      for (int r = 0; r < size; ++r)
        ASSERT_EQ(result[size_t(r)][size_t(round)], want) << "size " << size << " round " << round << " rank " << r;
    }
  }
}

TEST(ShmCommunicator, AllGatherConcatenatesInRankOrder) {
  const int size = 3;
  const int64_t n = 5;
  std::vector<std::vector<float>> out(size);
  on_ranks(size, [&](int r, Communicator& c) {
    std::vector<float> in(n, float(r + 1));
    out[size_t(r)].assign(size * n, -1.f);
    c.all_gather(in.data(), n, out[size_t(r)].data());
  });
  for (int r = 0; r < size; ++r)
    for (int k = 0; k < size * n; ++k) EXPECT_EQ(out[size_t(r)][size_t(k)], float(k / n + 1));
}

TEST(ShmCommunicator, GatherColumnsPlacesEachRanksBlockOnTheRoot) {
  // Rank r holds in[rows, cols_r] with value 1000*r + 10*i + j at (i, j): the root's out[i, c]
  // must come from the rank owning column c, at row i and column c - offset(rank).
  const int size = 3;
  const int64_t rows = 4;
  const int64_t cols[size] = {5, 3, 6};  // uneven, as the last rank of an indivisible vocabulary
  const int64_t total = 14;
  for (int root : {0, 2}) {
    std::vector<std::vector<float>> out(size, std::vector<float>(size_t(rows * total), -1.f));
    on_ranks(size, [&](int r, Communicator& c) {
      std::vector<float> in(size_t(rows * cols[r]));
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols[r]; ++j) in[size_t(i * cols[r] + j)] = float(1000 * r + 10 * i + j);
      for (int round = 0; round < 3; ++round)  // repeated rounds must not mix
        c.gather_columns(in.data(), rows, cols[r], out[size_t(r)].data(), root);  // ignored off the root
    });
    for (int64_t i = 0; i < rows; ++i) {
      int64_t col = 0;
      for (int r = 0; r < size; ++r)
        for (int64_t j = 0; j < cols[r]; ++j, ++col)
          ASSERT_EQ(out[size_t(root)][size_t(i * total + col)], float(1000 * r + 10 * i + j))
              << "root " << root << " row " << i << " column " << col;
    }
    for (int r = 0; r < size; ++r)
      if (r != root)
        for (float v : out[size_t(r)]) ASSERT_EQ(v, -1.f) << "rank " << r << " is not the root";
  }
}

TEST(ShmCommunicator, ManyRoundsStayInStep) {
  // 2000 back-to-back reductions of a counter: any rank running ahead into the next round would
  // corrupt a sum.
  std::vector<float> last(2);
  on_ranks(2, [&](int r, Communicator& c) {
    float acc = 0;
    for (int i = 0; i < 2000; ++i) {
      float x[3] = {float(r + 1), float(i), 1.f};
      c.all_reduce_sum(x, 3);
      ASSERT_EQ(x[0], 3.f);
      ASSERT_EQ(x[1], float(2 * i));
      acc += x[2];
      if (i % 97 == 0) c.barrier();
    }
    last[size_t(r)] = acc;
  });
  EXPECT_EQ(last[0], 4000.f);
  EXPECT_EQ(last[1], 4000.f);
}

TEST(ShmCommunicator, GroupSizeIsChecked) {
  EXPECT_THROW(make_shm_communicators(0), Error);
  EXPECT_THROW(make_shm_communicators(65), Error);
}

}  // namespace
}  // namespace pypto
