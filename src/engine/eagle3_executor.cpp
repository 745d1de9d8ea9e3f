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

void Eagle3Executor::start_capture(int64_t T) {
  aux_.resize(size_t(T * 3 * model_.hidden_size()));
  model_.set_aux_hidden_out(head_.aux_layers(), aux_.data());
}

const float* Eagle3Executor::drafter_rows(int64_t T) {
  fused_.resize(size_t(T * model_.hidden_size()));
  head_.fuse(aux_.data(), T, fused_.data());
  return fused_.data();
}

}  // namespace pypto
