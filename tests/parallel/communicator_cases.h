#pragma once
// The communicator contract (parallel/communicator.h) as per-rank checks: each case is called by
// every rank of a group with that rank's Communicator and checks that rank's own results, so the
// same cases run on threads (tests/parallel/communicator_test.cpp: the in-process and the
// process-shared-memory communicators) and on processes under mpirun
// (tests/distributed/mpi/mpi_communicator_check.cpp). Expected values are computed here from the
// contract, never by another communicator.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "parallel/communicator.h"

namespace pypto::test {

inline std::vector<float> comm_values(int rank, int round, int64_t n) {
  std::mt19937 rng(uint32_t(rank * 1000 + round));
  std::uniform_real_distribution<float> d(-100.f, 100.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

// all_reduce_sum is x_0 + x_1 + ... in rank order, in float, bitwise, for sizes that are not
// multiples of a cache line, smaller than the group, and larger than a staging slot.
inline void case_all_reduce_is_rank_order_sum(int r, Communicator& c) {
  const int size = c.size();
  EXPECT_EQ(c.rank(), r);
  const int64_t sizes[] = {1, 3, 16, 17, 1000, 4099, 70001};
  for (int round = 0; round < 7; ++round) {
    std::vector<float> x = comm_values(r, round, sizes[round]);
    c.all_reduce_sum(x.data(), int64_t(x.size()));
    std::vector<float> want = comm_values(0, round, sizes[round]);
    for (int q = 1; q < size; ++q) {
      const std::vector<float> v = comm_values(q, round, sizes[round]);
      for (size_t i = 0; i < want.size(); ++i) want[i] += v[i];
    }
    ASSERT_EQ(x, want) << "size " << size << " round " << round << " rank " << r;
  }
}

inline void case_all_gather_concatenates_in_rank_order(int r, Communicator& c) {
  const int size = c.size();
  for (int64_t n : {int64_t(5), int64_t(3001)}) {
    std::vector<float> in(static_cast<size_t>(n)), out(static_cast<size_t>(size * n), -1.f);
    for (int64_t k = 0; k < n; ++k) in[size_t(k)] = float(r * 100000 + k);
    c.all_gather(in.data(), n, out.data());
    for (int q = 0; q < size; ++q)
      for (int64_t k = 0; k < n; ++k) ASSERT_EQ(out[size_t(q * n + k)], float(q * 100000 + k)) << "rank " << r;
  }
}

// Rank q holds in[rows, cols_q] with value 1000*q + 10*i + j at (i, j) (uneven widths, as the last
// rank of an indivisible vocabulary): the root's out[i, c] comes from the rank owning column c;
// the other ranks' buffers are left alone.
inline void case_gather_columns_places_each_block_on_the_root(int r, Communicator& c) {
  const int size = c.size();
  const int64_t rows = 37;
  auto cols_of = [](int q) { return int64_t(5 + 3 * q); };
  int64_t total = 0;
  for (int q = 0; q < size; ++q) total += cols_of(q);
  for (int root : {0, size - 1}) {
    std::vector<float> in(static_cast<size_t>(rows * cols_of(r))), out(static_cast<size_t>(rows * total), -1.f);
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols_of(r); ++j) in[size_t(i * cols_of(r) + j)] = float(1000 * r + 10 * i + j);
    for (int round = 0; round < 3; ++round) c.gather_columns(in.data(), rows, cols_of(r), out.data(), root);
    if (r != root) {
      for (float v : out) ASSERT_EQ(v, -1.f) << "rank " << r << " is not the root";
      continue;
    }
    for (int64_t i = 0; i < rows; ++i) {
      int64_t col = 0;
      for (int q = 0; q < size; ++q)
        for (int64_t j = 0; j < cols_of(q); ++j, ++col)
          ASSERT_EQ(out[size_t(i * total + col)], float(1000 * q + 10 * i + j)) << "root " << root << " row " << i;
    }
  }
}

// broadcast copies the root's bytes everywhere (sizes below and above a staging slot).
inline void case_broadcast_copies_the_roots_bytes(int r, Communicator& c) {
  for (int root = 0; root < c.size(); ++root)
    for (int64_t bytes : {int64_t(1), int64_t(8), int64_t(1000), int64_t(300001)}) {
      std::vector<unsigned char> buf(static_cast<size_t>(bytes));
      for (int64_t k = 0; k < bytes; ++k) buf[size_t(k)] = static_cast<unsigned char>(r == root ? (k * 7 + root) : 0xEE);
      c.broadcast(buf.data(), bytes, root);
      for (int64_t k = 0; k < bytes; ++k)
        ASSERT_EQ(buf[size_t(k)], static_cast<unsigned char>(k * 7 + root)) << "rank " << r << " root " << root;
    }
}

// Point-to-point along a chain, as pipeline stages use it: rank r receives message k from r-1,
// adds r to every byte and sends it on to r+1; the last rank sends the result to rank 0. Sizes
// below and above a staging slot, an empty message, and many rounds in a row (a send that waits for
// its receiver must not deadlock this schedule, and messages must keep their order).
inline void case_send_recv_carries_bytes_along_a_chain(int r, Communicator& c) {
  const int size = c.size();
  if (size < 2) return;
  const int64_t sizes[] = {0, 1, 8, 1000, 300001};
  for (int round = 0; round < 40; ++round) {
    const int64_t bytes = sizes[round % 5];
    std::vector<unsigned char> buf(static_cast<size_t>(bytes));
    auto start = [&](int64_t k) { return static_cast<unsigned char>(k * 13 + round); };
    if (r == 0) {
      for (int64_t k = 0; k < bytes; ++k) buf[size_t(k)] = start(k);
    } else {
      c.recv(buf.data(), bytes, r - 1);
      for (int64_t k = 0; k < bytes; ++k)
        ASSERT_EQ(buf[size_t(k)], static_cast<unsigned char>(start(k) + (r - 1) * r / 2)) << "rank " << r << " round " << round;
      for (unsigned char& b : buf) b = static_cast<unsigned char>(b + r);
    }
    c.send(buf.data(), bytes, r + 1 < size ? r + 1 : 0);
    if (r == 0) {
      c.recv(buf.data(), bytes, size - 1);
      for (int64_t k = 0; k < bytes; ++k)
        ASSERT_EQ(buf[size_t(k)], static_cast<unsigned char>(start(k) + (size - 1) * size / 2)) << "round " << round;
    }
  }
}

// 2000 back-to-back reductions of a counter: a rank running ahead into the next round would
// corrupt a sum.
inline void case_many_rounds_stay_in_step(int r, Communicator& c) {
  const int size = c.size();
  float acc = 0;
  for (int i = 0; i < 2000; ++i) {
    float x[3] = {float(r + 1), float(i), 1.f};
    c.all_reduce_sum(x, 3);
    ASSERT_EQ(x[0], float(size * (size + 1) / 2));
    ASSERT_EQ(x[1], float(size * i));
    acc += x[2];
    if (i % 97 == 0) c.barrier();
  }
  EXPECT_EQ(acc, float(2000 * size));
}

}  // namespace pypto::test
