// The shared-memory communicators against the contract (communicator_cases.h), on threads: the
// in-process one (ranks read each other's buffers) and the process-shared one of the mp backend
// (staging slots in one shared segment; here with 64-float slots so every collective also runs in
// many pieces). Process ranks themselves are exercised in tests/distributed.
#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

#include "communicator_cases.h"
#include "core/error.h"
#include "parallel/process_shm_communicator.h"
#include "parallel/shm_communicator.h"

namespace pypto::test {
namespace {

using Case = void (*)(int, Communicator&);

std::vector<std::unique_ptr<Communicator>> make_group(const std::string& kind, int size) {
  if (kind == "in_process") return make_shm_communicators(size);
  auto group = ProcessShmGroup::create(size, 64);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(std::make_unique<ProcessShmCommunicator>(group, r));
  return comms;
}

// Runs the case on `size` threads, one communicator each.
void on_ranks(const std::string& kind, int size, Case fn) {
  auto comms = make_group(kind, size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) threads.emplace_back([&, r] { fn(r, *comms[size_t(r)]); });
  for (auto& t : threads) t.join();
}

class ShmCommunicators : public ::testing::TestWithParam<std::string> {};

TEST_P(ShmCommunicators, AllReduceIsTheRankOrderSumOnEveryRank) {
  for (int size : {1, 2, 3, 4}) on_ranks(GetParam(), size, case_all_reduce_is_rank_order_sum);
}
TEST_P(ShmCommunicators, AllGatherConcatenatesInRankOrder) {
  on_ranks(GetParam(), 3, case_all_gather_concatenates_in_rank_order);
}
TEST_P(ShmCommunicators, GatherColumnsPlacesEachRanksBlockOnTheRoot) {
  on_ranks(GetParam(), 3, case_gather_columns_places_each_block_on_the_root);
}
TEST_P(ShmCommunicators, BroadcastCopiesTheRootsBytes) {
  on_ranks(GetParam(), 3, case_broadcast_copies_the_roots_bytes);
}
TEST_P(ShmCommunicators, ManyRoundsStayInStep) { on_ranks(GetParam(), 2, case_many_rounds_stay_in_step); }
TEST_P(ShmCommunicators, SendRecvCarriesBytesAlongAChain) {
  for (int size : {2, 3, 4}) on_ranks(GetParam(), size, case_send_recv_carries_bytes_along_a_chain);
}

INSTANTIATE_TEST_SUITE_P(Kinds, ShmCommunicators, ::testing::Values("in_process", "process_shared"));

TEST(ShmCommunicator, GroupSizeIsChecked) {
  EXPECT_THROW(make_shm_communicators(0), Error);
  EXPECT_THROW(make_shm_communicators(65), Error);
  EXPECT_THROW(ProcessShmGroup::create(0), Error);
  EXPECT_THROW(ProcessShmGroup::create(65), Error);
}

// A broken group (a rank died: the mp monitor marks it) makes a waiting rank throw, not hang.
TEST(ProcessShmCommunicator, BrokenGroupThrowsInsteadOfWaiting) {
  auto group = ProcessShmGroup::create(2, 64);
  ProcessShmCommunicator c0(group, 0);
  std::thread breaker([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    group->mark_broken();
  });
  float x[4] = {1, 2, 3, 4};
  EXPECT_THROW(c0.all_reduce_sum(x, 4), Error);  // rank 1 never comes
  breaker.join();
}

}  // namespace
}  // namespace pypto::test
