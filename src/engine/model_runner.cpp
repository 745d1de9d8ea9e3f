#include "engine/model_runner.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

ModelRunner::ModelRunner(Qwen3Model& model, KvCache& cache) : model_(model), cache_(cache) {}

void ModelRunner::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  build_batch(so);
  out.vocab_size = model_.vocab_size();
  out.logits.resize(static_cast<size_t>(batch_.num_logits() * out.vocab_size));
  if (batch_.num_tokens() == 0) return;
  model_.forward(batch_, cache_, out.logits.data());
}

const ForwardBatch& ModelRunner::build_batch(const SchedulerOutput& so) {
  for (const std::string& id : so.finished_req_ids) block_tables_.erase(id);
  for (const std::string& id : so.preempted_req_ids) block_tables_.erase(id);

  // Block tables first (new/resumed requests replace theirs, running ones append), so the
  // batch's table width is known before sequences are added.
  int32_t max_blocks = 0;
  for (const ScheduledRequest& s : so.scheduled) {
    std::vector<int32_t>& table = block_tables_[s.req_id];
    if (s.is_new) table.clear();
    table.insert(table.end(), s.block_ids.begin(), s.block_ids.end());
    max_blocks = std::max(max_blocks, static_cast<int32_t>(table.size()));
  }
  batch_.clear();
  batch_.max_blocks_per_seq = max_blocks;
  const int32_t bs = cache_.block_size();
  for (const ScheduledRequest& s : so.scheduled) {
    const std::vector<int32_t>& table = block_tables_.at(s.req_id);
    PYPTO_ASSERT(static_cast<int64_t>(s.token_ids.size()) == s.num_scheduled_tokens);
    PYPTO_ASSERT(static_cast<int64_t>(table.size()) * bs >= s.num_computed_tokens + s.num_scheduled_tokens,
                 "request ", s.req_id, " has too few blocks");
    batch_.add_sequence(s.token_ids.data(), static_cast<int32_t>(s.num_scheduled_tokens),
                        static_cast<int32_t>(s.num_computed_tokens), table.data(), static_cast<int32_t>(table.size()),
                        bs, s.samples ? ForwardBatch::Logits::Last : ForwardBatch::Logits::None);
  }
  return batch_;
}

}  // namespace pypto
