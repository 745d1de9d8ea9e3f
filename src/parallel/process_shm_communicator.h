#pragma once
// Shared-memory communicator for TP ranks that are processes on one host
// (--distributed-executor-backend mp). Unlike ShmCommunicator (threads of one process, reading each
// other's buffers directly) processes cannot follow each other's pointers, so every rank owns a
// staging slot in one shared segment (a memfd mapped by every rank) and the collectives move data
// through the slots in pieces of at most slot_floats floats:
//   all_reduce_sum: each rank copies its piece into its slot; barrier; rank r sums chunk r of the
//     piece over the slots in rank order (the communicator.h contract: bitwise the same result as
//     the in-process and MPI communicators) and writes it into every slot; barrier; each rank copies
//     its slot back; barrier.
//   all_gather / gather_columns / broadcast: the owner writes its slot, barrier, readers copy.
// The barrier spins briefly, then sleeps on a process-shared futex. A group can be marked broken
// (a rank died, parallel/replicas/rank_monitor.h): waiting ranks then throw instead of waiting.
#include <cstdint>
#include <memory>

#include "parallel/communicator.h"

namespace pypto {

struct ProcessShmSegment;

// The segment shared by `size` ranks, each slot holding `slot_floats` floats. create() makes it
// (rank 0, before starting the others); fd() is inherited by the other ranks, which attach().
class ProcessShmGroup {
 public:
  static std::shared_ptr<ProcessShmGroup> create(int size, int64_t slot_floats = int64_t(1) << 20);
  static std::shared_ptr<ProcessShmGroup> attach(int fd);
  ~ProcessShmGroup();

  int fd() const { return fd_; }
  int size() const;
  // Rank r's liveness counter (rank_monitor: bumped by r's heartbeat thread, read by rank 0).
  uint64_t heartbeat(int r) const;
  void beat(int r);
  // Makes every current and future wait throw Error(reason): a peer is gone.
  void mark_broken();
  bool broken() const;

  ProcessShmSegment& seg() { return *seg_; }

 private:
  ProcessShmGroup() = default;
  int fd_ = -1;
  size_t bytes_ = 0;
  ProcessShmSegment* seg_ = nullptr;
};

class ProcessShmCommunicator : public Communicator {
 public:
  ProcessShmCommunicator(std::shared_ptr<ProcessShmGroup> group, int rank);

  int rank() const override { return rank_; }
  int size() const override;
  void all_reduce_sum(float* x, int64_t n) override;
  void all_gather(const float* in, int64_t n, float* out) override;
  void gather_columns(const float* in, int64_t rows, int64_t cols, float* out, int root) override;
  void broadcast(void* data, int64_t bytes, int root) override;
  void barrier() override;
  // Through the sender's slot, piece by piece (the receiver copies each piece out; send returns
  // once the last piece is taken, so the slot is free for the next collective).
  void send(const void* data, int64_t bytes, int dest) override;
  void recv(void* data, int64_t bytes, int src) override;

 private:
  float* slot(int r);
  std::shared_ptr<ProcessShmGroup> group_;
  int rank_;
};

}  // namespace pypto
