#include "engine/eagle3_executor.h"

#include "core/error.h"

namespace pypto {

std::shared_ptr<MtpProposer> make_eagle3_proposer(const ModelConfig& target, Eagle3Head& head, KvCache& cache) {
  PYPTO_ASSERT(head.hidden_size() == target.hidden_size, "EAGLE-3 head and target hidden sizes");
  Eagle3Head* h = &head;
  KvCache* kv = &cache;
  // The drafter's passes: rows pairing a hidden state (fused target state, or the head's previous
  // prenorm output) with the next token; logits [num_logits, vocab], out [T, H] the prenorm rows.
  // A pass without logits rows (MtpProposer::run_kv) writes only its rows' KV.
  MtpProposer::RemotePass pass = [h, kv](const ForwardBatch& batch, const std::vector<float>& hidden,
                                         std::vector<float>& logits, std::vector<float>& out) {
    if (batch.num_logits() == 0) h->store_kv(batch, hidden.data(), *kv);
    else h->forward(batch, hidden.data(), *kv, logits.data(), out.data());
  };
  auto proposer = std::make_shared<MtpProposer>(target, std::move(pass), cache.num_blocks(), cache.block_size());
  // The executors hand over the captured aux rows [T, 3H]; fc runs only on the rows a pass reads.
  proposer->set_fuse(int64_t(head.aux_layers().size()) * head.hidden_size(),
                     [h](const float* aux, int64_t n, float* fused) { h->fuse(aux, n, fused); });
  return proposer;
}

void Eagle3Executor::start_capture(int64_t T) {
  aux_.resize(size_t(T * 3 * model_.hidden_size()));
  model_.set_aux_hidden_out(head_.aux_layers(), aux_.data());
}

const float* Eagle3Executor::drafter_rows(int64_t T) {
  PYPTO_ASSERT(int64_t(aux_.size()) >= T * 3 * model_.hidden_size(), "captured aux rows");
  return aux_.data();  // fused by the drafter, only where a pass reads them (make_eagle3_proposer)
}

}  // namespace pypto
