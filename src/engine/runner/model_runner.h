#pragma once
// ModelRunner: the ModelExecutor over a Qwen3Model and its paged KvCache. Each step it mirrors
// the block tables from the SchedulerOutput, packs every scheduled token of every request into one
// ForwardBatch (prefill chunks and decodes together; logits only for rows that sample), and runs
// one forward pass. The KvCache must have as many blocks, of the same block size, as the engine's
// CacheConfig.
#include "engine/block_tables.h"
#include "engine/model_executor.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/qwen3_model.h"

namespace pypto {

class ModelRunner : public ModelExecutor {
 public:
  // `model` and `cache` must outlive the runner.
  ModelRunner(Qwen3Model& model, KvCache& cache);

  void execute(const SchedulerOutput& so, ExecutorOutput& out) override;

  // Fills `batch` for `so` from the current block tables (exposed for tests).
  void build_batch(const SchedulerOutput& so, ForwardBatch& batch) const;

 private:
  Qwen3Model& model_;
  KvCache& cache_;
  BlockTables tables_;
  ForwardBatch batch_;  // reused: clear() keeps capacity, so a steady state allocates nothing
};

}  // namespace pypto
