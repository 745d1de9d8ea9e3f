#pragma once
// The tensor-parallel communicator: the collective operations the ranks of one TP group need.
// The model holds only a Communicator* (null = one rank), so an NCCL implementation (GPU ranks,
// device pointers) or an MPI one (ranks on several hosts) can be added next to the in-process
// shared-memory one (shm_communicator.h) without touching the model.
//
// Contract shared by every implementation:
//  - collectives are called by every rank of the group, in the same order, with the same n;
//  - all_reduce_sum is deterministic: element i becomes x_0[i] + x_1[i] + ... + x_{size-1}[i],
//    summed in rank order starting from rank 0, so the result is bitwise identical on every rank
//    and does not depend on timing;
//  - a collective returns only when the caller's buffers may be reused.
//
// NCCL / MPI mapping: all_reduce_sum is ncclAllReduce / MPI_Allreduce (with a fixed reduction
// order; NCCL's ring order is deterministic for a fixed group), all_gather is ncclAllGather /
// MPI_Allgather, gather_columns is MPI_Gatherv into a [size][rows × cols_r] staging buffer (NCCL:
// grouped ncclSend / ncclRecv to the root) followed by a local transpose into the column blocks.
#include <cstdint>

namespace pypto {

class Communicator {
 public:
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // x[n] (f32) ← Σ over ranks of x[n], in place, summed in rank order.
  virtual void all_reduce_sum(float* x, int64_t n) = 0;
  // out[size * n] ← [in_0 | in_1 | ... | in_{size-1}] (rank r contributes in[n] at out + r*n).
  virtual void all_gather(const float* in, int64_t n, float* out) = 0;
  // Gathers a matrix split by columns onto `root`. Rank r holds in[rows, cols] (row-major, its own
  // cols, which may differ between ranks; rows is the same everywhere). On the root, out becomes
  // [rows, C] with C = Σ cols over ranks, rank r's block at columns [Σ_{q<r} cols_q, + cols_r):
  // the logits of a vocab-parallel lm_head (rank r's vocab slice) → the full [rows, vocab] logits.
  // `out` is ignored (may be null) on the other ranks.
  virtual void gather_columns(const float* in, int64_t rows, int64_t cols, float* out, int root) = 0;
  // data[bytes] on every rank ← root's data[bytes] (every rank passes the same byte count). The
  // control channel of ranks that are processes: rank 0 sends each step's batch with it
  // (parallel/replicas/rank_worker.h). MPI: MPI_Bcast; NCCL: ncclBroadcast.
  virtual void broadcast(void* data, int64_t bytes, int root) = 0;
  // Returns once every rank has called it.
  virtual void barrier() = 0;

  // Point-to-point (pipeline stages pass hidden states [tokens, hidden] and logits along with
  // these; parallel/replicas/pipeline_stage.h). send() may block until `dest` has called the
  // matching recv() (every implementation may be synchronous, so a schedule must be deadlock-free
  // under that: the pipeline's is); recv() receives exactly `bytes` from `src`. Messages between one
  // pair of ranks arrive in the order they were sent. MPI: MPI_Send / MPI_Recv; NCCL:
  // ncclSend / ncclRecv.
  virtual void send(const void* data, int64_t bytes, int dest) = 0;
  virtual void recv(void* data, int64_t bytes, int src) = 0;
};

}  // namespace pypto
