#pragma once
// --speculative-config method mtp under --pp-virtual-engines (threads or rank processes): the pp
// engines of a replica share its pipeline stages (step_pipeline.h), and each has its own MTP
// drafter, as each has its own scheduler. The drafter's bookkeeping (MtpProposer) runs on rank 0,
// on its engine's thread; its passes go down the shared pipeline as jobs between the engines'
// steps (StepPipeline::run_mtp_pass: the first stage looks the embedding rows up, the last stage's
// TP ranks run the head over their slice), and each step brings back its final normed hidden rows
// (StepPipeline::run's hidden_out). The last stage's MTP KV pool holds every engine's blocks:
// engine g owns block ids [g·B, (g+1)·B) of it (B = its MTP blocks), as it owns its stretch of
// the target's KV blocks and of the GDN state slots (VirtualEngineShare), so the engines' MTP
// contexts never meet.
#include <cstdint>
#include <memory>

#include "engine/model_executor.h"
#include "io/model_config.h"
#include "parallel/replicas/step_pipeline.h"

namespace pypto {

class DraftProposer;

// Engine g's executor (a VirtualEngineExecutor over `pipeline`, which must have enable_mtp())
// with its drafter in *drafter: an MTP pool of mtp_blocks of block_size, shifted by g·mtp_blocks
// in the last stage's pool.
std::unique_ptr<ModelExecutor> make_mtp_virtual_engine_executor(std::shared_ptr<StepPipeline> pipeline,
                                                                const VirtualEngineShare& share, int32_t block_size,
                                                                const ModelConfig& config, int g, int64_t mtp_blocks,
                                                                std::shared_ptr<DraftProposer>* drafter);

}  // namespace pypto
