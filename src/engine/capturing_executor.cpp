#include "engine/capturing_executor.h"

namespace pypto {

CapturingExecutor::CapturingExecutor(Qwen3Model& model, KvCache& cache, std::shared_ptr<MtpProposer> drafter)
    : model_(model), cache_(cache), runner_(model, cache), drafter_(std::move(drafter)) {}

void CapturingExecutor::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  const ForwardBatch& batch = runner_.build_batch(so);
  out.vocab_size = model_.output_width();
  out.logits.resize(static_cast<size_t>(batch.num_logits() * out.vocab_size));
  const int64_t T = batch.num_tokens();
  if (T == 0) return;
  start_capture(T);
  try {
    model_.forward(batch, cache_, out.logits.data());
  } catch (...) {
    stop_capture();
    throw;
  }
  stop_capture();
  drafter_->observe(so, batch, drafter_rows(T));
}

}  // namespace pypto
