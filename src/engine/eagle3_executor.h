#pragma once
// The model executor for --speculative-config method eagle3: the target's step as ModelRunner
// runs it (one rank; each --dp replica its own), with the residual stream entering each of the
// head's three aux layers captured for every row (Qwen3Model::set_aux_hidden_out) and handed to
// the drafter after the step, which fuses them by the head's fc into one [H] state per row only
// for the rows it computes (MtpProposer::set_fuse: a plain step of the cost model fuses nothing)
// (MtpProposer::observe: the EAGLE-3 head drafts through the MTP drafter's bookkeeping, the same
// row pairing h_t with x_{t+1} in its own KV indexed by the target's block ids, the same
// rollback; make_eagle3_proposer below). Without an EAGLE-3 drafter the target captures nothing.
#include <memory>
#include <vector>

#include "engine/capturing_executor.h"
#include "model/eagle3_head.h"

namespace pypto {

// The drafter over `head` (which must outlive it, with `cache`: num_blocks ≥ the target's blocks
// plus the lookahead, model/eagle3_head.h's KV shape); `target` gives the hidden size and vocabulary.
// It observes the captured aux rows [T, 3H] and runs the head's fc on the rows its passes read.
std::shared_ptr<MtpProposer> make_eagle3_proposer(const ModelConfig& target, Eagle3Head& head, KvCache& cache);

class Eagle3Executor : public CapturingExecutor {
 public:
  // `model`, `cache` and `head` must outlive the executor (or be handed to keep_alive()).
  Eagle3Executor(Qwen3Model& model, KvCache& cache, Eagle3Head& head, std::shared_ptr<MtpProposer> drafter)
      : CapturingExecutor(model, cache, std::move(drafter)), head_(head) {}

 private:
  void start_capture(int64_t T) override;
  void stop_capture() override { model_.set_aux_hidden_out({}, nullptr); }
  const float* drafter_rows(int64_t T) override;  // the captured aux rows [T, 3H]

  Eagle3Head& head_;
  std::vector<float> aux_;  // [T, 3H] captured
};

}  // namespace pypto
