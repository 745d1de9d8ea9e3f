#include "parallel/replicas/eagle3_rank_pass.h"

#include <cstring>

#include "core/error.h"
#include "engine/eagle3_executor.h"
#include "parallel/replicas/eagle3_captured_step.h"
#include "model/mtp_head.h"
#include "parallel/replicas/replica_link.h"
#include "parallel/replicas/rank_worker.h"

namespace pypto {

void serve_eagle3_embedding(const std::vector<uint8_t>& message, const Qwen3Weights& weights, Backend& backend,
                            Communicator* tp_group, std::vector<float>& e, std::vector<int32_t>& local_ids) {
  PYPTO_ASSERT(message.size() % sizeof(int32_t) == 0, "EAGLE-3 embedding message of ", message.size(), " bytes");
  const int64_t T = int64_t(message.size() / sizeof(int32_t));
  std::vector<int32_t> ids(static_cast<size_t>(T));
  std::memcpy(ids.data(), message.data(), message.size());
  e.resize(size_t(T * weights.config.hidden_size));
  MtpHead::lookup_embedding(weights, backend, tp_group, ids.data(), T, e.data(), local_ids);
}

namespace {

// Replica 0 under rank processes: the target's step on the ranks with rank 0 capturing the aux
// rows, then fc and the drafter's observe on rank 0, as Eagle3TpExecutor does with threads.
class Eagle3ProcessExecutor : public ModelExecutor {
 public:
  Eagle3ProcessExecutor(std::shared_ptr<ProcessTpExecutor> inner, std::shared_ptr<Eagle3Head> head,
                        std::shared_ptr<MtpProposer> drafter)
      : inner_(std::move(inner)), head_(std::move(head)), drafter_(std::move(drafter)) {}

  void execute(const SchedulerOutput& so, ExecutorOutput& out) override { step_.execute(*inner_, *head_, *drafter_, so, out); }
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override { inner_->parallel_rows(n, fn); }

 private:
  std::shared_ptr<ProcessTpExecutor> inner_;
  std::shared_ptr<Eagle3Head> head_;
  std::shared_ptr<MtpProposer> drafter_;
  Eagle3CapturedStep step_;
};

}  // namespace

std::unique_ptr<ModelExecutor> make_eagle3_process_executor(std::unique_ptr<ProcessTpExecutor> inner,
                                                            std::shared_ptr<const Eagle3Weights> head_w,
                                                            int64_t head_blocks, int32_t block_size, DType kv_dtype,
                                                            std::shared_ptr<DraftProposer>* drafter) {
  std::shared_ptr<ProcessTpExecutor> exec(std::move(inner));
  ProcessTpExecutor* x = exec.get();
  const bool tp = x->comm().size() > 1;
  // The target's embedding rows: every rank looks its share up at rank 0's word (the message
  // above) and the TP group all-reduces them.
  auto ids_scratch = std::make_shared<std::vector<int32_t>>();
  auto message = std::make_shared<std::vector<uint8_t>>();
  Eagle3Head::EmbeddingLookup lookup = [x, tp, ids_scratch, message](const int32_t* ids, int64_t T, float* e) {
    if (tp) {
      message->resize(size_t(T) * sizeof(int32_t));
      std::memcpy(message->data(), ids, message->size());
      StepHeader h{kEagle3EmbeddingMessage, int64_t(message->size())};
      x->comm().broadcast(&h, sizeof h, 0);
      x->comm().broadcast(message->data(), h.bytes, 0);
    }
    MtpHead::lookup_embedding(x->weights(), x->backend(), tp ? &x->comm() : nullptr, ids, T, e, *ids_scratch);
  };
  auto head = std::make_shared<Eagle3Head>(head_w, lookup, x->backend());
  auto cache = std::make_shared<KvCache>(head->kv_cache_spec(head_blocks, block_size, kv_dtype));
  auto mtp = make_eagle3_proposer(x->weights().config, *head, *cache);
  // The scheduler holds the drafter too: its passes use rank 0's backend and communicator, which
  // the executor owns, so the proposer keeps it, the head and its KV alive.
  mtp->keep_alive({std::shared_ptr<const void>(exec), std::shared_ptr<const void>(head_w),
                   std::shared_ptr<const void>(head), std::shared_ptr<const void>(cache),
                   std::shared_ptr<const void>(ids_scratch), std::shared_ptr<const void>(message)});
  *drafter = mtp;
  return std::make_unique<Eagle3ProcessExecutor>(std::move(exec), std::move(head), std::move(mtp));
}

}  // namespace pypto
