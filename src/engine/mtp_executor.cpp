#include "engine/mtp_executor.h"

namespace pypto {

MtpExecutor::MtpExecutor(Qwen3Model& model, KvCache& cache, std::shared_ptr<MtpProposer> mtp)
    : model_(model), cache_(cache), runner_(model, cache), mtp_(std::move(mtp)) {}

void MtpExecutor::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  const ForwardBatch& batch = runner_.build_batch(so);
  out.vocab_size = model_.output_width();
  out.logits.resize(static_cast<size_t>(batch.num_logits() * out.vocab_size));
  if (batch.num_tokens() == 0) return;
  hidden_.resize(static_cast<size_t>(batch.num_tokens() * model_.hidden_size()));
  model_.set_normed_hidden_out(hidden_.data());
  try {
    model_.forward(batch, cache_, out.logits.data());
  } catch (...) {
    model_.set_normed_hidden_out(nullptr);
    throw;
  }
  model_.set_normed_hidden_out(nullptr);
  mtp_->observe(so, batch, hidden_.data());
}

}  // namespace pypto
