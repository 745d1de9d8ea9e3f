#pragma once
// The model executor for --speculative-config method mtp (one rank; each --dp replica its own;
// --tp / --pp: parallel/replicas/mtp_tp_executor.h): the final normed hidden state of every row
// captured (Qwen3Model::set_normed_hidden_out) for the MTP drafter, which needs h_t for every
// target position it drafts from.
#include <memory>
#include <vector>

#include "engine/capturing_executor.h"

namespace pypto {

class MtpExecutor : public CapturingExecutor {
 public:
  // `model` and `cache` must outlive the executor (or be handed to keep_alive()).
  MtpExecutor(Qwen3Model& model, KvCache& cache, std::shared_ptr<MtpProposer> mtp)
      : CapturingExecutor(model, cache, std::move(mtp)) {}

 private:
  void start_capture(int64_t T) override;
  void stop_capture() override { model_.set_normed_hidden_out(nullptr); }
  const float* drafter_rows(int64_t) override { return hidden_.data(); }

  std::vector<float> hidden_;  // [T, hidden] of the step
};

}  // namespace pypto
