#pragma once
// --speculative-config method eagle3 with rank processes (--distributed-executor-backend mp /
// mpi) under --tp, one stage and one replica: rank 0 holds the whole residual stream after each
// all-reduce, so it captures the aux rows itself (ProcessTpExecutor::capture_aux_hidden), and the
// head (small) runs unsharded in rank 0's process on its backend, between the steps, as with
// thread ranks (eagle3_tp_executor.h). Only a head without embed_tokens needs the other ranks:
// the target's embedding is vocab-parallel, so each lookup is a message of the step protocol
// (rank_worker.h):
//
//   rank 0 → replica (broadcast): StepHeader {kEagle3EmbeddingMessage, bytes}, then the token
//             ids int32 [T] (bytes = 4T); every rank looks its rows up and all-reduces them over
//             the TP group (MtpHead::lookup_embedding, bitwise one rank's lookup); rank 0 keeps e.
//
// --pp, --dp and --pp-virtual-engines with rank processes are refused (eagle3_load.h): the aux
// rows of a later stage would have to come back to rank 0 after each step.
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/model_executor.h"
#include "kernels/backend.h"
#include "model/eagle3_head.h"
#include "model/qwen3_weights.h"
#include "parallel/communicator.h"

namespace pypto {

class DraftProposer;
class ProcessTpExecutor;

// StepHeader kind of an EAGLE-3 embedding lookup (after kMtpPassMessage 3, mtp_rank_pass.h).
inline constexpr int64_t kEagle3EmbeddingMessage = 4;

// A worker's share of one lookup: `message` the token ids (after the StepHeader); e, local_ids
// scratch (its rows are not kept).
void serve_eagle3_embedding(const std::vector<uint8_t>& message, const Qwen3Weights& weights, Backend& backend,
                            Communicator* tp_group, std::vector<float>& e, std::vector<int32_t>& local_ids);

// Replica 0's executor over `inner` (rank 0's ProcessTpExecutor, one stage) with the EAGLE-3
// drafter in *drafter: the head on rank 0's backend with a KV pool of head_blocks of block_size.
std::unique_ptr<ModelExecutor> make_eagle3_process_executor(std::unique_ptr<ProcessTpExecutor> inner,
                                                            std::shared_ptr<const Eagle3Weights> head,
                                                            int64_t head_blocks, int32_t block_size, DType kv_dtype,
                                                            std::shared_ptr<DraftProposer>* drafter);

}  // namespace pypto
