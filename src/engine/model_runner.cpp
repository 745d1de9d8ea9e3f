#include "engine/model_runner.h"

namespace pypto {

ModelRunner::ModelRunner(Qwen3Model& model, KvCache& cache) : model_(model), cache_(cache) {
  // Hybrid models: each running request also holds a slot of the model's GDN state pool.
  // (By the config: under --pp this may be a stage without GDN layers, the others' slots alike.)
  if (model_.config().hybrid()) block_tables_.enable_state_slots(model_.state_slot_count());
}

void ModelRunner::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  build_batch(so);
  out.vocab_size = model_.output_width();  // the vocabulary, or a pooling head's width
  out.logits.resize(static_cast<size_t>(batch_.num_logits() * out.vocab_size));
  if (batch_.num_tokens() == 0) return;
  model_.forward(batch_, cache_, out.logits.data());
}

const ForwardBatch& ModelRunner::build_batch(const SchedulerOutput& so) {
  build_forward_batch(so, block_tables_, cache_.block_size(), batch_);
  return batch_;
}

}  // namespace pypto
