#include "parallel/replicas/mtp_virtual_engines.h"

#include "core/error.h"
#include "engine/mtp_proposer.h"

namespace pypto {

std::unique_ptr<ModelExecutor> make_mtp_virtual_engine_executor(std::shared_ptr<StepPipeline> pipeline,
                                                                const VirtualEngineShare& share, int32_t block_size,
                                                                const ModelConfig& config, int g, int64_t mtp_blocks,
                                                                std::shared_ptr<DraftProposer>* drafter) {
  PYPTO_ASSERT(g >= 0 && mtp_blocks > 0, "virtual engine ", g, " with ", mtp_blocks, " MTP blocks");
  const int64_t block_offset = int64_t(g) * mtp_blocks;
  // The proposer numbers its blocks from 0 (its free list); the last stage's pool holds every
  // engine's, this one's from block_offset. The pass runs on the engine's thread; `shifted` is
  // its scratch.
  auto shifted = std::make_shared<ForwardBatch>();
  auto pass = [pipeline, shifted, block_offset, block_size](const ForwardBatch& batch, const std::vector<float>& hidden,
                                                            std::vector<float>& logits, std::vector<float>& out) {
    *shifted = batch;
    for (int64_t& slot : shifted->slot_mapping) slot += block_offset * block_size;
    for (int32_t& b : shifted->block_tables) b += int32_t(block_offset);
    pipeline->run_mtp_pass(*shifted, hidden, logits, out);
  };
  auto mtp = std::make_shared<MtpProposer>(config, pass, mtp_blocks, block_size);
  auto exec = std::make_unique<VirtualEngineExecutor>(pipeline, share, block_size);
  exec->observe_hidden(
      [mtp](const SchedulerOutput& so, const ForwardBatch& batch, const float* hidden) { mtp->observe(so, batch, hidden); },
      config.hidden_size);
  *drafter = std::move(mtp);
  return exec;
}

}  // namespace pypto
