#pragma once
// Start-up of the draft model for --speculative-config method draft_model: the draft checkpoint
// is opened, checked to fit and staged like the target (same stager, its own `quantization`),
// and its KV pool is sized with the target's (load_replicas adds the draft's bytes per block to
// the target's, so one memory budget covers both).
#include <cstdint>
#include <memory>

#include "engine/model_runner.h"
#include "engine/speculative_config.h"
#include "model/qwen3_weights.h"

namespace pypto {

class DraftModelProposer;
class StepPipeline;

// The draft's staged weights. Throws Error naming the draft directory or the key at fault.
std::shared_ptr<const Qwen3Weights> stage_draft_weights(const SpeculativeConfig& spec, const EngineLoadOptions& eo,
                                                        const Backend& stager);

// KV bytes of one block of the draft (all its layers).
int64_t draft_kv_bytes_per_block(const Qwen3Weights& draft, const EngineLoadOptions& eo);

// The drafter over `draft`, running on `backend` (the target's rank-0 backend), with a KV pool of
// the target's block count plus room for every running request's k lookahead tokens (the draft
// never holds more of a request than the target does, plus its drafts).
std::shared_ptr<DraftModelProposer> make_draft_proposer(std::shared_ptr<const Qwen3Weights> draft, Backend& backend,
                                                        const EngineLoadOptions& eo, int64_t target_blocks);

// The same on a pool of its own, which the drafter keeps: replica i > 0 of --dp with rank
// processes, whose engine runs in rank 0's process while its ranks are other processes.
std::shared_ptr<DraftModelProposer> make_draft_proposer(std::shared_ptr<const Qwen3Weights> draft,
                                                        std::unique_ptr<Backend> backend, const EngineLoadOptions& eo,
                                                        int64_t target_blocks);

// A virtual engine's drafter (--pp-virtual-engines, threads or rank processes): on stage 0's TP
// rank 0 like the single-engine drafter, whose pool belongs to the pipeline thread there, so each
// pass runs on that thread between the engines' steps (StepPipeline::run_on_stage0). The drafter
// holds `pipeline`; engine_blocks: the engine's target KV blocks.
std::shared_ptr<DraftModelProposer> make_pipelined_draft_proposer(std::shared_ptr<const Qwen3Weights> draft,
                                                                  std::shared_ptr<StepPipeline> pipeline,
                                                                  const EngineLoadOptions& eo, int64_t engine_blocks);

}  // namespace pypto
