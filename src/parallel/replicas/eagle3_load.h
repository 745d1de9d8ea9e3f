#pragma once
// Start-up for --speculative-config method eagle3: the EAGLE-3 head (model/eagle3_head.h) is
// packed by the stager beside the target, its one-layer KV pool is sized with the target's (its
// bytes per block are added to the target's, so one memory budget covers both), and each replica
// runs its target through Eagle3Executor on one rank, or under --tp / --pp (thread ranks) through
// Eagle3TpExecutor (parallel/replicas/eagle3_tp_executor.h: the aux rows captured on the stages
// that hold the aux layers, the head unsharded on rank 0), each with its own head KV pool and
// drafter over the shared head weights; under --pp-virtual-engines each engine its own drafter
// (parallel/replicas/eagle3_virtual_engines.h). Rank processes run it under --tp only
// (parallel/replicas/eagle3_rank_pass.h); --pp, --dp and --pp-virtual-engines with them are refused.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_executor.h"
#include "engine/model_runner.h"
#include "model/eagle3_head.h"
#include "model/qwen3_weights.h"
#include "parallel/replicas/tp_model_runner.h"

namespace pypto {

class DraftProposer;

// Refuses the layouts the head does not run under (naming the option).
void check_eagle3_layout(bool rank_processes, int pp, int dp, bool pp_virtual_engines);

// KV bytes of one block of the head's layer.
int64_t eagle3_kv_bytes_per_block(const Eagle3Weights& head, const EngineLoadOptions& eo);

// The target's executor (one rank) and the EAGLE-3 drafter; the executor keeps the weights, the
// backend, the model, the head and the caches alive. *drafter receives the proposer.
std::unique_ptr<ModelExecutor> make_eagle3_executor(std::shared_ptr<const Qwen3Weights> target,
                                                    std::shared_ptr<const Eagle3Weights> head,
                                                    std::unique_ptr<Backend> backend, int64_t num_blocks,
                                                    const EngineLoadOptions& eo, std::shared_ptr<DraftProposer>* drafter);

// --tp / --pp (thread ranks): the replica's TpModelRunner over `ranks` (pp stages, micro-batches
// `micro`) with the EAGLE-3 drafter on its rank 0 (parallel/replicas/eagle3_tp_executor.h).
std::unique_ptr<ModelExecutor> make_eagle3_tp_executor(std::vector<TpRankParts> ranks, int pp, MicroBatchPolicy micro,
                                                       std::shared_ptr<const Eagle3Weights> head, int64_t num_blocks,
                                                       const EngineLoadOptions& eo, const std::string& track_prefix,
                                                       std::shared_ptr<DraftProposer>* drafter);

}  // namespace pypto
