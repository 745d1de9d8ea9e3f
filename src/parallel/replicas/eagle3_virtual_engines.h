#pragma once
// --speculative-config method eagle3 under --pp-virtual-engines (threads backend): the pp engines
// of a replica share its pipeline stages (step_pipeline.h), and each has its own EAGLE-3 drafter
// (MtpProposer over its own Eagle3Head and head KV pool), as each has its own scheduler. Each
// step brings back the residual stream entering the head's aux layers, gathered along the stages
// (StepPipeline::enable_aux_capture: each stage's TP rank 0 fills in the aux layers it holds);
// the head's fc and its passes run unsharded on stage 0's TP rank 0, the pipeline thread's pool
// (StepPipeline::run_on_stage0, between the steps it sends, as the draft model's passes do),
// reading the target's embedding from stage 0's slice when the head has none: that needs the
// whole table there, so --tp > 1 with a head without embed_tokens is refused (check below).
#include <cstdint>
#include <memory>

#include "engine/model_executor.h"
#include "model/eagle3_head.h"
#include "parallel/replicas/step_pipeline.h"

namespace pypto {

class DraftProposer;

// Refuses --pp-virtual-engines with --tp > 1 for a head that reads the target's embedding (vocab-
// parallel over stage 0's TP ranks, which the pipeline thread cannot gather between steps).
void check_eagle3_virtual_engines(const Eagle3Weights& head, int tp);

// Engine g's executor (a VirtualEngineExecutor over `pipeline`, which must have
// enable_aux_capture(head aux layers)) with its drafter in *drafter: a head KV pool of
// head_blocks of block_size in kv_dtype.
std::unique_ptr<ModelExecutor> make_eagle3_virtual_engine_executor(std::shared_ptr<StepPipeline> pipeline,
                                                                   const VirtualEngineShare& share,
                                                                   std::shared_ptr<const Eagle3Weights> head,
                                                                   int64_t head_blocks, int32_t block_size,
                                                                   DType kv_dtype,
                                                                   std::shared_ptr<DraftProposer>* drafter);

}  // namespace pypto
