#pragma once
// --speculative-config method mtp with rank processes (--distributed-executor-backend mp; --tp
// and --pp, one replica): the MTP head lives where the thread ranks keep it, sharded over the last
// pipeline stage's TP ranks (each its MTP layer slice and its share of the MTP KV pool), but those
// are processes now. Rank 0 keeps the drafter's bookkeeping (MtpProposer, on the engine thread)
// and runs each of its passes on the ranks through the step protocol of rank_worker.h:
//
//   rank 0 → replica (broadcast): StepHeader {kMtpPassMessage, bytes}, then the pass:
//             int64 batch_bytes, the encoded ForwardBatch (batch_codec.h: the MTP rows' next
//             tokens, positions, slots in the MTP KV pool, logits rows), hidden [T, H] f32;
//   --pp:     first-stage TP rank t → last-stage TP rank t: the embedding rows e [T, H] f32 of
//             the batch's tokens (only the first stage holds the embedding; looked up as the
//             thread ranks look it up, vocab-parallel over the first stage's TP group);
//   every last-stage rank runs MtpHead::forward over its slice (its collectives over its TP
//   group), TP rank 0 gathering the logits;
//   --pp:     last-stage TP rank 0 → rank 0: logits [num_logits, V] f32, out [T, H] f32.
//
// The drafter reads the target's final normed hidden state of every row of every step. With one
// stage rank 0 is the last stage's TP rank 0 and captures it itself; under --pp the last stage's
// TP rank 0 sends it to rank 0 after the step's logits ([T, H] f32; rank 0 sends the rows back
// with the passes that use them: the bookkeeping stays in one place at the cost of that copy).
//
// --dp with rank processes: replica i > 0 is driven over its link (replica_link.h), and so are its
// drafter's passes. Rank 0 keeps replica i's drafter too (on replica i's engine thread) and sends
// each pass to the replica's leader (its first rank) as StepHeader {kMtpPassMessage, bytes} and the
// same message; the leader broadcasts it to its replica and runs its share as rank 0 does for
// replica 0, then answers LinkReply {error bytes}, then logits [num_logits, V] f32 and out [T, H]
// f32 (or the error's text). After each step's logits the leader also sends the step's hidden rows
// [T, H] f32 (captured itself with one stage, received from its last stage under --pp).
//
// Every rank checks a pass's token ids before its first message or collective, so a bad pass
// throws the same Error everywhere and nobody waits.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_executor.h"
#include "engine/mtp_proposer.h"
#include "model/kv_cache.h"
#include "model/mtp_head.h"
#include "model/qwen3_weights.h"
#include "parallel/communicator.h"
#include "parallel/replicas/pipeline_stage.h"

namespace pypto {

class ProcessTpExecutor;
class RemoteReplicaExecutor;

// StepHeader kind of an MTP pass (after kStepMessage 1 and kStopMessage 2, replica_link.h).
inline constexpr int64_t kMtpPassMessage = 3;

// The pass message after its StepHeader: int64 batch_bytes, the encoded batch (batch_codec.h),
// hidden [T, H] f32. decode_mtp_pass fails naming what is malformed.
void encode_mtp_pass(const ForwardBatch& batch, const std::vector<float>& hidden, std::vector<uint8_t>& message);
void decode_mtp_pass(const std::vector<uint8_t>& message, int64_t H, ForwardBatch& batch, std::vector<float>& hidden);

// One rank's share of the MTP drafter's passes (rank 0's and every worker's).
class MtpRankPart {
 public:
  // weights: this rank's slice (staged with its MTP layer on the last stage); backend: its
  // compute; replica: the replica's pp × tp ranks (the pass's broadcast, the --pp messages);
  // tp_group: the communicator of this rank's stage's TP group (null with tp 1); mtp_blocks of
  // block_size: the MTP KV pool (every last-stage rank its KV heads' share). All must outlive it.
  MtpRankPart(const Qwen3Weights& weights, Backend& backend, Communicator& replica, Communicator* tp_group,
              StagePosition pos, int64_t mtp_blocks, int32_t block_size, DType kv_dtype);

  // Rank 0: sends the pass (batch, hidden [T, H]) to the replica and runs its own share; fills
  // logits [batch.num_logits(), V] and out [T, H] (sized by the caller: MtpProposer::RemotePass).
  void drive(const ForwardBatch& batch, const std::vector<float>& hidden, std::vector<float>& logits,
             std::vector<float>& out);
  // A worker: the pass in `message` (after its StepHeader), run as its share; a replica's leader
  // (--dp) keeps head rank 0's logits and outputs for reply_over_link().
  void serve(const std::vector<uint8_t>& message);
  // A replica's leader after serve(): LinkReply, then the pass's logits and outputs, or `refused`
  // (serve()'s error) as text, to rank 0 over `link`.
  void reply_over_link(Communicator& link, const std::string& refused);
  // Rank 0 for replica i > 0 (--dp): sends the pass to the replica's leader over `link` and
  // receives its logits [batch.num_logits(), V] and out [T, H] (sized by the caller), or throws the
  // error the replica refused it with.
  static void drive_over_link(Communicator& link, const ForwardBatch& batch, const std::vector<float>& hidden,
                              std::vector<float>& logits, std::vector<float>& out, std::vector<uint8_t>& message);

  // After each target step that ran, on every rank: under --pp the last stage's TP rank 0 sends
  // `hidden` (its captured [rows, H]) to rank 0, which receives it into `hidden`. Nothing with one
  // stage (rank 0 captured it).
  void exchange_step_hidden(int64_t rows, std::vector<float>& hidden);
  // Whether this rank captures the step's hidden rows for the drafter: the last stage's TP rank 0.
  bool captures_step_hidden() const { return pos_.last() && pos_.tp_rank == 0; }

 private:
  void run(const ForwardBatch& batch, const float* hidden, float* logits, float* out);

  const Qwen3Weights& weights_;
  Backend& backend_;
  Communicator& replica_;
  Communicator* tp_group_;
  StagePosition pos_;
  std::unique_ptr<MtpHead> head_;  // the last stage's ranks
  std::unique_ptr<KvCache> cache_;
  std::vector<float> e_, logits_, out_;  // [T, H] embedding rows, this rank's pass results (--pp)
  std::vector<float> link_logits_, link_out_;  // a --dp replica's leader: the pass's results for rank 0
  std::vector<int32_t> local_ids_;
  std::vector<uint8_t> message_;
  ForwardBatch batch_;
  std::vector<float> hidden_;
};

// Rank 0's executor with MTP: ProcessTpExecutor's step, then the step's hidden rows to the drafter
// (MtpProposer::observe); the drafter's passes run through `part` on every rank. *drafter receives
// the proposer for EngineConfig::drafter (an MTP pool of mtp_blocks of block_size).
// Rank 0's executor of replica i > 0 with MTP: `inner` (its RemoteReplicaExecutor over `link`)
// runs the step, then the leader's hidden rows [T, H] are received over `link` and handed to the
// replica's own drafter, whose passes run over `link` (drive_over_link). *drafter receives it.
std::unique_ptr<ModelExecutor> make_mtp_link_executor(std::unique_ptr<RemoteReplicaExecutor> inner,
                                                      std::shared_ptr<Communicator> link, const ModelConfig& config,
                                                      int64_t mtp_blocks, int32_t block_size,
                                                      std::shared_ptr<DraftProposer>* drafter);

std::unique_ptr<ModelExecutor> make_mtp_process_executor(std::unique_ptr<ProcessTpExecutor> inner,
                                                         std::shared_ptr<MtpRankPart> part, const ModelConfig& config,
                                                         int pp, int64_t mtp_blocks, int32_t block_size,
                                                         std::shared_ptr<DraftProposer>* drafter);

}  // namespace pypto
