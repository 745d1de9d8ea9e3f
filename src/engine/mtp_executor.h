#pragma once
// The model executor for --speculative-config method mtp: the target's step as ModelRunner runs
// it (one rank; each --dp replica its own; --tp / --pp: parallel/replicas/mtp_tp_executor.h),
// with the final normed hidden state of every row captured (Qwen3Model::set_normed_hidden_out)
// and handed to the MTP drafter after the step (MtpProposer::observe), which needs h_t for every
// target position it drafts from.
#include <memory>
#include <vector>

#include "engine/model_runner.h"
#include "engine/mtp_proposer.h"

namespace pypto {

class MtpExecutor : public ModelExecutor {
 public:
  // `model` and `cache` must outlive the executor (or be handed to keep_alive()).
  MtpExecutor(Qwen3Model& model, KvCache& cache, std::shared_ptr<MtpProposer> mtp);
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override;
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override {
    model_.backend().parallel_rows(n, fn);
  }
  // Parts the executor keeps alive (the loader's weights, backend, model, cache), released after
  // the proposer.
  void keep_alive(std::vector<std::shared_ptr<const void>> parts) { parts_ = std::move(parts); }

 private:
  std::vector<std::shared_ptr<const void>> parts_;  // destroyed last
  Qwen3Model& model_;
  KvCache& cache_;
  ModelRunner runner_;
  std::shared_ptr<MtpProposer> mtp_;
  std::vector<float> hidden_;  // [T, hidden] of the step
};

}  // namespace pypto
