#include "engine/runner/model_runner.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

ModelRunner::ModelRunner(Qwen3Model& model, KvCache& cache) : model_(model), cache_(cache) {}

void ModelRunner::build_batch(const SchedulerOutput& so, ForwardBatch& batch) const {
  batch.clear();
  int32_t max_blocks = 1;
  for (const ScheduledRequest& s : so.scheduled)
    max_blocks = std::max(max_blocks, int32_t(tables_.table(s.req_id).size()));
  batch.max_blocks_per_seq = max_blocks;
  const int32_t bs = cache_.block_size();
  for (const ScheduledRequest& s : so.scheduled) {
    const std::vector<int32_t>& table = tables_.table(s.req_id);
    batch.add_sequence(s.token_ids.data(), int32_t(s.num_scheduled_tokens), int32_t(s.num_computed_tokens),
                       table.data(), int32_t(table.size()), bs,
                       s.samples ? ForwardBatch::Logits::Last : ForwardBatch::Logits::None);
  }
}

void ModelRunner::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  tables_.apply(so);
  build_batch(so, batch_);
  out.vocab_size = model_.vocab_size();
  out.logits.assign(size_t(batch_.num_logits() * out.vocab_size), 0.0f);
  if (batch_.num_tokens() == 0) return;
  model_.forward(batch_, cache_, out.logits.data());
}

}  // namespace pypto
