#include "parallel/replicas/eagle3_tp_executor.h"

#include "core/error.h"
#include "engine/eagle3_executor.h"
#include "model/mtp_head.h"

namespace pypto {

namespace {

// The target's embedding rows looked up on stage 0's TP ranks (vocab-parallel under TP: each its
// rows, all-reduced), written by rank 0 into e [T, H].
Eagle3Head::EmbeddingLookup stage0_embedding(TpModelRunner& runner) {
  TpModelRunner* tp = &runner;
  const int n = runner.tp();
  // Per TP rank: its rows [T, H] (rank 0 writes the caller's) and its local ids.
  auto rows = std::make_shared<std::vector<std::vector<float>>>(size_t(n));
  auto ids_scratch = std::make_shared<std::vector<std::vector<int32_t>>>(size_t(n));
  return [tp, n, rows, ids_scratch](const int32_t* ids, int64_t T, float* e) {
    if (n == 1) {  // one TP rank: the whole table on rank 0
      MtpHead::lookup_embedding(tp->weights(0), tp->backend(0), nullptr, ids, T, e, (*ids_scratch)[0]);
      return;
    }
    const int64_t H = tp->weights(0).config.hidden_size;
    tp->run_on_ranks([&](int r) {
      if (r >= n) return;  // the later stages' ranks idle
      float* dst = e;
      if (r > 0) {
        (*rows)[size_t(r)].resize(size_t(T * H));
        dst = (*rows)[size_t(r)].data();
      }
      MtpHead::lookup_embedding(tp->weights(r), tp->backend(r), tp->comm(r), ids, T, dst, (*ids_scratch)[size_t(r)]);
    });
  };
}

}  // namespace

Eagle3TpExecutor::Eagle3TpExecutor(std::unique_ptr<TpModelRunner> runner, std::shared_ptr<const Eagle3Weights> head,
                                   int64_t head_blocks, int32_t block_size, DType kv_dtype)
    : runner_(std::move(runner)) {
  PYPTO_ASSERT(head->own_embed || runner_->weights(0).has_embed, "rank 0 holds the target's embedding (stage 0)");
  head_ = std::make_shared<Eagle3Head>(head, stage0_embedding(*runner_), runner_->backend(0));
  head_cache_ = std::make_shared<KvCache>(head_->kv_cache_spec(head_blocks, block_size, kv_dtype));
  drafter_ = make_eagle3_proposer(runner_->weights(0).config, *head_, *head_cache_);
  // The engine's scheduler holds the drafter too; its passes use rank 0's backend and (for the
  // embedding) the ranks' communicators: the runner, head and KV live as long as either.
  drafter_->keep_alive({std::shared_ptr<const void>(runner_), std::shared_ptr<const void>(head),
                        std::shared_ptr<const void>(head_), std::shared_ptr<const void>(head_cache_)});
}

void Eagle3TpExecutor::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  step_.execute(*runner_, *head_, *drafter_, so, out);
}

}  // namespace pypto
