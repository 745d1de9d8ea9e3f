#pragma once
// The model executor for --speculative-config method eagle3 under --tp and --pp (thread ranks):
// the target's step runs on the replica's ranks (TpModelRunner), and the residual stream entering
// each of the head's three aux layers is captured for every row into this executor's buffer
// [T, 3H] (TpModelRunner::capture_aux_hidden): under TP every rank holds the whole stream after
// each all-reduce, so TP rank 0 of a stage writes it; under PP the aux layers may sit on
// different stages, and each stage's TP rank 0 writes the column blocks of the layers it holds
// (threads share memory, so the rows are gathered where they are written; the step's end orders
// the writes before the engine thread reads them). After the step the head's fc fuses them and
// the drafter observes the fused rows (MtpProposer::observe), as Eagle3Executor does on one rank.
//
// The head is small and runs unsharded on rank 0 (the engine thread's backend, stage 0's TP rank
// 0), its passes between the target's steps. When it has no embed_tokens of its own it reads the
// target's embedding from stage 0: under TP a vocab-parallel lookup on stage 0's TP ranks at once
// (TpModelRunner::run_on_ranks; the other stages' ranks idle), all-reduced, bitwise what one rank
// looks up.
#include <memory>
#include <vector>

#include "engine/model_executor.h"
#include "engine/mtp_proposer.h"
#include "model/eagle3_head.h"
#include "parallel/replicas/eagle3_captured_step.h"
#include "parallel/replicas/tp_model_runner.h"

namespace pypto {

class Eagle3TpExecutor : public ModelExecutor {
 public:
  // The drafter (proposer()) over `head` on `runner`'s rank 0, with a head KV pool of
  // `head_blocks` blocks of `block_size` in `kv_dtype`.
  Eagle3TpExecutor(std::unique_ptr<TpModelRunner> runner, std::shared_ptr<const Eagle3Weights> head,
                   int64_t head_blocks, int32_t block_size, DType kv_dtype);

  void execute(const SchedulerOutput& so, ExecutorOutput& out) override;
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override { runner_->parallel_rows(n, fn); }

  // The drafter for EngineConfig::drafter.
  std::shared_ptr<MtpProposer> proposer() const { return drafter_; }
  TpModelRunner& runner() { return *runner_; }

 private:
  std::shared_ptr<TpModelRunner> runner_;  // shared with the drafter, which may outlive the executor
  std::shared_ptr<Eagle3Head> head_;
  std::shared_ptr<KvCache> head_cache_;
  std::shared_ptr<MtpProposer> drafter_;
  Eagle3CapturedStep step_;  // the aux rows captured each step (the drafter fuses the rows it reads)
};

}  // namespace pypto
