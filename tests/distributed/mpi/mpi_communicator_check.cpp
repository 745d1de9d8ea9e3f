// The MPI communicator against the contract (tests/parallel/communicator_cases.h): run under
// mpirun (CTest: mpi_communicator_np3), one process per rank, each checking its own results.
// Every rank sums in rank order, so the reductions are bitwise what the contract says.
#include <gtest/gtest.h>

#include "communicator_cases.h"
#include "parallel/mpi_communicator.h"

namespace pypto::test {
namespace {

Communicator& world() {
  static std::unique_ptr<Communicator> c = make_mpi_world_communicator();
  return *c;
}

TEST(MpiCommunicator, AllReduceIsTheRankOrderSumOnEveryRank) {
  case_all_reduce_is_rank_order_sum(world().rank(), world());
}
TEST(MpiCommunicator, AllGatherConcatenatesInRankOrder) {
  case_all_gather_concatenates_in_rank_order(world().rank(), world());
}
TEST(MpiCommunicator, GatherColumnsPlacesEachRanksBlockOnTheRoot) {
  case_gather_columns_places_each_block_on_the_root(world().rank(), world());
}
TEST(MpiCommunicator, BroadcastCopiesTheRootsBytes) { case_broadcast_copies_the_roots_bytes(world().rank(), world()); }
TEST(MpiCommunicator, ManyRoundsStayInStep) { case_many_rounds_stay_in_step(world().rank(), world()); }
TEST(MpiCommunicator, SendRecvCarriesBytesAlongAChain) {
  case_send_recv_carries_bytes_along_a_chain(world().rank(), world());
}
// A split by color (pipeline stages' TP groups): ranks 0, 2, ... and 1, 3, ... form two groups,
// each ordered by world rank; a reduction inside one sees only its own members.
TEST(MpiCommunicator, SplitGroupsReduceOverTheirOwnMembers) {
  const int r = world().rank(), size = world().size();
  std::unique_ptr<Communicator> g = make_mpi_split_communicator(r % 2, r);
  EXPECT_EQ(g->rank(), r / 2);
  EXPECT_EQ(g->size(), (size - r % 2 + 1) / 2);
  float x = float(r);
  g->all_reduce_sum(&x, 1);
  float want = 0;
  for (int q = r % 2; q < size; q += 2) want += float(q);
  EXPECT_EQ(x, want);
}

}  // namespace
}  // namespace pypto::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int launched = pypto::mpi_launch_from_env().size;
  if (launched < 2) {
    std::fprintf(stderr, "run me under mpirun with 2 or more processes\n");
    return 2;
  }
  const int rc = RUN_ALL_TESTS();
  pypto::mpi_finalize();
  return rc;
}
