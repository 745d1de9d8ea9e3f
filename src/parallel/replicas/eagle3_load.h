#pragma once
// Start-up for --speculative-config method eagle3: the EAGLE-3 head (model/eagle3_head.h) is
// packed by the stager beside the target, its one-layer KV pool is sized with the target's (its
// bytes per block are added to the target's, so one memory budget covers both), and each replica
// runs its target through Eagle3Executor on one rank with its own head KV pool and drafter over
// the shared head weights. --tp, --pp, --pp-virtual-engines and rank processes are refused (the
// head runs on one rank only).
#include <cstdint>
#include <memory>

#include "engine/model_executor.h"
#include "engine/model_runner.h"
#include "model/eagle3_head.h"
#include "model/qwen3_weights.h"

namespace pypto {

class DraftProposer;

// Refuses the layouts the head does not run under (naming the option).
void check_eagle3_layout(int tp, int pp, bool pp_virtual_engines, bool rank_processes);

// KV bytes of one block of the head's layer.
int64_t eagle3_kv_bytes_per_block(const Eagle3Weights& head, const EngineLoadOptions& eo);

// The target's executor (one rank) and the EAGLE-3 drafter; the executor keeps the weights, the
// backend, the model, the head and the caches alive. *drafter receives the proposer.
std::unique_ptr<ModelExecutor> make_eagle3_executor(std::shared_ptr<const Qwen3Weights> target,
                                                    std::shared_ptr<const Eagle3Weights> head,
                                                    std::unique_ptr<Backend> backend, int64_t num_blocks,
                                                    const EngineLoadOptions& eo, std::shared_ptr<DraftProposer>* drafter);

}  // namespace pypto
