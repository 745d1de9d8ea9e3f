#pragma once
// The target's step as ModelRunner runs it (one rank; each --dp replica its own), with rows of the
// target's hidden states captured for a drafter and handed to it after the step
// (MtpProposer::observe). What is captured is the subclass's: the final normed state for MTP
// (mtp_executor.h), the residual stream at three aux layers fused by the head's fc for EAGLE-3
// (eagle3_executor.h). The model's capture is pointed at the subclass's buffers only for the
// forward call, and cleared even when it throws.
#include <memory>
#include <vector>

#include "engine/model_runner.h"
#include "engine/mtp_proposer.h"

namespace pypto {

class CapturingExecutor : public ModelExecutor {
 public:
  void execute(const SchedulerOutput& so, ExecutorOutput& out) final;
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override {
    model_.backend().parallel_rows(n, fn);
  }
  // Parts the executor keeps alive (the loader's weights, backend, model, cache, head), released
  // after everything else it holds.
  void keep_alive(std::vector<std::shared_ptr<const void>> parts) { parts_ = std::move(parts); }

 protected:
  // `model` and `cache` must outlive the executor (or be handed to keep_alive()).
  CapturingExecutor(Qwen3Model& model, KvCache& cache, std::shared_ptr<MtpProposer> drafter);
  // Point the model's capture at buffers for a step of T rows (before the forward call).
  virtual void start_capture(int64_t T) = 0;
  // Clear the model's capture (after the forward call, also when it threw).
  virtual void stop_capture() = 0;
  // The step's [T, hidden] rows the drafter observes (after stop_capture).
  virtual const float* drafter_rows(int64_t T) = 0;

 private:
  std::vector<std::shared_ptr<const void>> parts_;  // destroyed last

 protected:
  Qwen3Model& model_;

 private:
  KvCache& cache_;
  ModelRunner runner_;
  std::shared_ptr<MtpProposer> drafter_;
};

}  // namespace pypto
