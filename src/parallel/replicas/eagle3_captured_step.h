#pragma once
// The EAGLE-3 drafter's side of one target step on ranks, shared by Eagle3TpExecutor (thread
// ranks) and the rank-process executor (eagle3_rank_pass.cpp): the step runs with rank 0 capturing
// the aux rows of the head's layers, then the drafter observes them (make_eagle3_proposer's
// drafter runs the head's fc on the rows its passes read).
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "engine/model_executor.h"
#include "engine/mtp_proposer.h"
#include "model/eagle3_head.h"
#include "model/forward_batch.h"

namespace pypto {

class Eagle3CapturedStep {
 public:
  // Runs `so` on `ranks` (TpModelRunner or ProcessTpExecutor) into `out`, then feeds the drafter.
  template <class Ranks>
  void execute(Ranks& ranks, Eagle3Head& head, MtpProposer& drafter, const SchedulerOutput& so, ExecutorOutput& out) {
    ranks.capture_aux_hidden(head.aux_layers(), &aux_);  // this executor's buffer, for this step only
    try {
      ranks.execute(so, out);
    } catch (...) {
      ranks.capture_aux_hidden({}, nullptr);
      throw;
    }
    ranks.capture_aux_hidden({}, nullptr);
    const ForwardBatch& batch = ranks.last_batch();
    const int64_t T = batch.num_tokens(), H = head.hidden_size();
    if (T == 0) return;
    PYPTO_ASSERT(int64_t(aux_.size()) >= T * 3 * H, "captured aux rows");
    drafter.observe(so, batch, aux_.data());
  }

 private:
  std::vector<float> aux_;  // [T, 3H] captured
};

}  // namespace pypto
