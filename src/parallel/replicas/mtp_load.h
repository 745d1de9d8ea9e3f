#pragma once
// Start-up for --speculative-config method mtp: the target is staged with its MTP head
// (StagingOptions::mtp), the MTP layer's KV pool is sized with the target's (its bytes per block
// are added to the target's, so one memory budget covers both), and the engine runs the target
// through MtpExecutor (the hidden states the drafter reads) on one rank per replica.
#include <cstdint>
#include <memory>

#include "engine/model_executor.h"
#include "engine/model_runner.h"
#include "model/qwen3_weights.h"

namespace pypto {

class DraftProposer;
struct ReplicaLoadOptions;

// Refuses the layouts the MTP drafter does not run under yet (--tp, --pp, rank processes), naming
// them. --dp replicas (threads) each get their own executor and drafter over the shared weights.
void check_mtp_layout(int tp, int pp, bool process_comm);

// KV bytes of one block of the MTP layer (one full-attention layer of the target's shape).
int64_t mtp_kv_bytes_per_block(const Qwen3Weights& target, const EngineLoadOptions& eo);

// The target's executor and the MTP drafter over the staged target (its `mtp` weights), on
// `backend`; the executor keeps weights, backend, model and caches alive. *drafter receives the
// proposer for EngineConfig::drafter.
std::unique_ptr<ModelExecutor> make_mtp_executor(std::shared_ptr<const Qwen3Weights> target,
                                                 std::unique_ptr<Backend> backend, int64_t num_blocks,
                                                 const EngineLoadOptions& eo, std::shared_ptr<DraftProposer>* drafter);

}  // namespace pypto
