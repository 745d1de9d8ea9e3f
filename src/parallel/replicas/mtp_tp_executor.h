#pragma once
// The model executor for --speculative-config method mtp under --tp (thread ranks): the target's
// step runs on the replica's TP ranks (TpModelRunner), the final normed hidden state of every row
// is captured on rank 0 (every rank holds the same after the final all-reduce) and handed to the
// MTP drafter after the step (MtpProposer::observe), as MtpExecutor does on one rank.
//
// The drafter's head is sharded like the target: rank r runs the MTP layer over its slice (its
// query / KV heads, MLP columns or expert share, its share of the MTP KV cache), the embedding and
// lm_head vocab-parallel, logits gathered onto rank 0 (model/mtp_head.h). Its passes (inside
// observe() after a step, and in the scheduler's prepare() before the next) run on every rank at
// once through TpModelRunner::run_on_ranks, between the target's steps, so no rank is idle while
// it drafts and no rank holds a second copy of anything.
#include <memory>
#include <vector>

#include "engine/model_executor.h"
#include "engine/mtp_proposer.h"
#include "parallel/replicas/tp_model_runner.h"

namespace pypto {

class MtpTpExecutor : public ModelExecutor {
 public:
  // `runner` holds one pipeline stage (pp 1); the drafter (mtp_proposer()) is built over its ranks
  // with an MTP KV pool of `mtp_blocks` blocks of `block_size`.
  MtpTpExecutor(std::unique_ptr<TpModelRunner> runner, int64_t mtp_blocks, int32_t block_size, DType kv_dtype);

  void execute(const SchedulerOutput& so, ExecutorOutput& out) override;
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override { runner_->parallel_rows(n, fn); }

  // The drafter for EngineConfig::drafter.
  std::shared_ptr<MtpProposer> mtp_proposer() const { return mtp_; }
  TpModelRunner& runner() { return *runner_; }

 private:
  std::shared_ptr<TpModelRunner> runner_;  // shared with the drafter, which may outlive the executor
  std::shared_ptr<MtpProposer> mtp_;
  std::vector<float> hidden_;  // [T, hidden] of the step
};

}  // namespace pypto
