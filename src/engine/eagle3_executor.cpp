#include "engine/eagle3_executor.h"

#include "core/error.h"

namespace pypto {

std::shared_ptr<MtpProposer> make_eagle3_proposer(const ModelConfig& target, Eagle3Head& head, KvCache& cache) {
  PYPTO_ASSERT(head.hidden_size() == target.hidden_size, "EAGLE-3 head and target hidden sizes");
  Eagle3Head* h = &head;
  KvCache* kv = &cache;
  // The drafter's passes: rows pairing a hidden state (fused target state, or the head's previous
  // prenorm output) with the next token; logits [num_logits, vocab], out [T, H] the prenorm rows.
  MtpProposer::RemotePass pass = [h, kv](const ForwardBatch& batch, const std::vector<float>& hidden,
                                         std::vector<float>& logits, std::vector<float>& out) {
    h->forward(batch, hidden.data(), *kv, logits.data(), out.data());
  };
  return std::make_shared<MtpProposer>(target, std::move(pass), cache.num_blocks(), cache.block_size());
}

Eagle3Executor::Eagle3Executor(Qwen3Model& model, KvCache& cache, Eagle3Head& head,
                               std::shared_ptr<MtpProposer> drafter)
    : model_(model), cache_(cache), head_(head), runner_(model, cache), drafter_(std::move(drafter)) {}

void Eagle3Executor::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  const ForwardBatch& batch = runner_.build_batch(so);
  out.vocab_size = model_.output_width();
  out.logits.resize(size_t(batch.num_logits() * out.vocab_size));
  const int64_t T = batch.num_tokens(), H = model_.hidden_size();
  if (T == 0) return;
  aux_.resize(size_t(T * 3 * H));
  fused_.resize(size_t(T * H));
  model_.set_aux_hidden_out(head_.aux_layers(), aux_.data());
  try {
    model_.forward(batch, cache_, out.logits.data());
  } catch (...) {
    model_.set_aux_hidden_out({}, nullptr);
    throw;
  }
  model_.set_aux_hidden_out({}, nullptr);
  head_.fuse(aux_.data(), T, fused_.data());
  drafter_->observe(so, batch, fused_.data());
}

}  // namespace pypto
