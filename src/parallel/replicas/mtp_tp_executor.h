#pragma once
// The model executor for --speculative-config method mtp under --tp and --pp (thread ranks): the
// target's step runs on the replica's ranks (TpModelRunner), the final normed hidden state of
// every row is captured by the last stage's TP rank 0 (every TP rank holds the same after the
// final all-reduce; threads share memory, so it writes this executor's buffer directly) and handed
// to the MTP drafter after the step (MtpProposer::observe), as MtpExecutor does on one rank.
//
// The drafter's head is sharded like the target over the last stage's TP group: TP rank t runs
// the MTP layer over its slice (its query / KV heads, MLP columns or expert share, its share of
// the MTP KV cache), lm_head vocab-parallel with the logits gathered onto TP rank 0, and the
// embedding vocab-parallel from the first stage's slice of TP rank t (model/mtp_head.h). Its
// passes (inside observe() after a step, and in the scheduler's prepare() before the next) run on
// those ranks at once through TpModelRunner::run_on_ranks, between the target's steps. No rank
// holds a second copy of anything: the MTP layer is staged on the last stage only.
#include <memory>
#include <vector>

#include "engine/model_executor.h"
#include "engine/mtp_proposer.h"
#include "parallel/replicas/tp_model_runner.h"

namespace pypto {

class MtpTpExecutor : public ModelExecutor {
 public:
  // The drafter (mtp_proposer()) is built over `runner`'s last stage with an MTP KV pool of
  // `mtp_blocks` blocks of `block_size`.
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
