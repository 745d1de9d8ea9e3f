#pragma once
// In-process shared-memory communicator for the tensor-parallel ranks of one host, one thread per
// rank. The ranks publish pointers to their buffers in a shared ShmGroup and read each other's
// memory directly: no copies through a staging buffer, no system calls on the fast path.
//
// all_reduce_sum is a reduce-scatter + all-gather done in place: after a barrier, rank r sums
// chunk r of the element range over all ranks (in rank order, so the result is deterministic and
// identical everywhere) and writes the sum into every rank's buffer; a second barrier ends it.
// Chunks are cache-line aligned so two ranks never write the same line.
//
// gather_columns: the root publishes its output pointer, every rank publishes its column count,
// and each rank copies its own block into the root's rows (the copies run in parallel).
#include <memory>
#include <vector>

#include "parallel/communicator.h"

namespace pypto {

class ShmGroup;

class ShmCommunicator : public Communicator {
 public:
  ShmCommunicator(std::shared_ptr<ShmGroup> group, int rank);

  int rank() const override { return rank_; }
  int size() const override;
  void all_reduce_sum(float* x, int64_t n) override;
  void all_gather(const float* in, int64_t n, float* out) override;
  void gather_columns(const float* in, int64_t rows, int64_t cols, float* out, int root) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void barrier() override;
  void send(const void* data, int64_t bytes, int dest) override;  // returns once dest has copied it
  void recv(void* data, int64_t bytes, int src) override;

 private:
  std::shared_ptr<ShmGroup> group_;
  int rank_;
};

// One communicator per rank of a new group of `size` ranks (element r is rank r). Each must be
// used by one thread at a time; the group lives as long as any of them.
std::vector<std::unique_ptr<Communicator>> make_shm_communicators(int size);

}  // namespace pypto
