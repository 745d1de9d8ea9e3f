#pragma once
// Data parallelism with ranks as processes (--dp N with --distributed-executor-backend mp|mpi):
// rank 0 holds every replica's engine (scheduler, sampler) and the router and HTTP server; replica
// 0's ranks include rank 0 itself (ProcessTpExecutor, rank_worker.h), and each other replica i is
// driven over a two-rank link between rank 0 and the replica's first rank (its leader, global rank
// i × pp × tp):
//   rank 0 → leader: StepHeader {kStep, bytes}, then the encoded ForwardBatch (batch_codec.h);
//                    or StepHeader {kStop, 0} at shutdown;
//   leader → rank 0: LinkReply {error bytes}, then the step's logits [rows, vocab] f32, or the
//                    error's text when the batch was refused (a token outside the vocabulary);
//                    with the MTP drafter, the step's hidden rows [T, H] f32 after the logits and
//                    its passes as StepHeader {kMtpPassMessage, bytes} (mtp_rank_pass.h).
// The leader runs each batch with its replica exactly as rank 0 runs replica 0's: it broadcasts it
// to its replica's ranks and runs its own slice (rank_worker.cpp). The replicas' links are
// separate communicators, so rank 0's engine threads use them concurrently.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/block_tables.h"
#include "engine/model_executor.h"
#include "model/forward_batch.h"
#include "parallel/communicator.h"

namespace pypto {

// What a batch's first rank (rank 0 of a replica, or rank 0 towards a leader) sends before each
// step: the kind and the size of the encoded batch that follows.
struct StepHeader {
  int64_t kind;   // kStep or kStop
  int64_t bytes;  // the encoded batch that follows (kStep)
};
inline constexpr int64_t kStepMessage = 1, kStopMessage = 2;

// The leader's answer to a step: error_bytes == 0 (the logits follow) or the length of the error
// text that follows.
struct LinkReply {
  int64_t error_bytes;
};

// Rank 0's executor of replica i > 0: keeps the replica's block tables, builds each step's batch
// and sends it over `link` (rank 0 → rank 1 of the link), waits for the logits. Sends Stop when
// destroyed (unless a rank fault was recorded: nobody listens then). The sampler's rows run on the
// engine thread (rank 0's compute threads belong to replica 0).
class RemoteReplicaExecutor : public ModelExecutor {
 public:
  // state_slots: a hybrid's GDN state slots per replica (--max-num-seqs; 0 for a dense model), which
  // this executor hands out as ModelRunner does (the leader's model holds that many).
  RemoteReplicaExecutor(std::shared_ptr<Communicator> link, int64_t vocab_size, int32_t block_size,
                        int32_t state_slots);
  ~RemoteReplicaExecutor() override;
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override;
  // The batch of the last execute() (the MTP drafter reads its rows: mtp_rank_pass.h).
  const ForwardBatch& last_batch() const { return batch_; }

 private:
  std::shared_ptr<Communicator> link_;
  int64_t vocab_size_;
  int32_t block_size_;
  BlockTables tables_;
  ForwardBatch batch_;
  std::vector<uint8_t> message_;
};


}  // namespace pypto
