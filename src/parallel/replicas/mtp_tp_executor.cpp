#include "parallel/replicas/mtp_tp_executor.h"

#include "core/error.h"

namespace pypto {

MtpTpExecutor::MtpTpExecutor(std::unique_ptr<TpModelRunner> runner, int64_t mtp_blocks, int32_t block_size,
                             DType kv_dtype)
    : runner_(std::move(runner)) {
  // The head's ranks: the last stage's TP group (every rank with one stage), each reading the
  // embedding from the first stage's slice of its TP rank.
  const int last0 = runner_->last_stage_rank0();
  std::vector<MtpProposer::Rank> ranks;
  for (int t = 0; t < runner_->tp(); ++t)
    ranks.push_back({&runner_->weights(last0 + t), &runner_->backend(last0 + t), runner_->comm(last0 + t),
                     &runner_->weights(t)});
  TpModelRunner* tp = runner_.get();
  auto fanout = [tp, last0](const std::function<void(int)>& fn) {
    tp->run_on_ranks([&](int r) {
      if (r >= last0) fn(r - last0);  // the earlier stages' ranks idle while the head runs
    });
  };
  mtp_ = std::make_shared<MtpProposer>(std::move(ranks), fanout, mtp_blocks, block_size, kv_dtype);
  // The engine's scheduler holds the drafter too, and its heads use the ranks' backends and
  // communicators: the runner lives as long as either.
  mtp_->keep_alive({std::shared_ptr<const void>(runner_)});
}

void MtpTpExecutor::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  runner_->capture_normed_hidden(&hidden_);  // this executor's buffer, for this step only
  try {
    runner_->execute(so, out);
  } catch (...) {
    runner_->capture_normed_hidden(nullptr);
    throw;
  }
  runner_->capture_normed_hidden(nullptr);
  const ForwardBatch& batch = runner_->last_batch();
  if (batch.num_tokens() == 0) return;
  PYPTO_ASSERT(int64_t(hidden_.size()) >= batch.num_tokens() * int64_t(runner_->weights(0).config.hidden_size),
               "captured hidden rows");
  mtp_->observe(so, batch, hidden_.data());
}

}  // namespace pypto
