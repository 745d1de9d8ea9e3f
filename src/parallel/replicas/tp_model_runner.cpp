#include "parallel/replicas/tp_model_runner.h"

#include "core/error.h"
#include "core/profiler.h"

namespace pypto {
namespace {

// Waits until `word` differs from `old`: a short spin (steps follow each other closely), then a
// futex sleep so an idle replica burns no CPU.
template <typename T>
void wait_change(const std::atomic<T>& word, T old) {
  for (int i = 0; i < 4096; ++i) {
    if (word.load(std::memory_order_acquire) != old) return;
    if ((i & 63) == 63) std::this_thread::yield();
  }
  while (word.load(std::memory_order_acquire) == old) word.wait(old, std::memory_order_acquire);
}

}  // namespace

TpModelRunner::TpModelRunner(std::vector<TpRankParts> ranks, int64_t num_blocks, int32_t block_size, DType kv_dtype,
                             std::string track_prefix, int pp, MicroBatchPolicy micro)
    : pp_(pp), track_prefix_(std::move(track_prefix)) {
  const int n = static_cast<int>(ranks.size());
  PYPTO_ASSERT(pp >= 1 && n >= pp && n % pp == 0, n, " ranks for ", pp, " pipeline stages");
  const int tp = n / pp;
  for (int r = 0; r < n; ++r) {
    TpRankParts& p = ranks[size_t(r)];
    const StagePosition pos = StagePosition::of_rank(r, pp, tp);
    PYPTO_ASSERT(p.backend && p.weights, "rank ", r, " is incomplete");
    PYPTO_ASSERT(p.weights->tp_rank == pos.tp_rank && p.weights->tp_size == tp, "rank ", r, " holds the slice of rank ",
                 p.weights->tp_rank, "/", p.weights->tp_size);
    PYPTO_ASSERT(tp == 1 || (p.comm && p.comm->rank() == pos.tp_rank && p.comm->size() == tp), "rank ", r,
                 " communicator");
    Rank rk;
    rk.parts = std::move(p);
    rk.model = std::make_unique<Qwen3Model>(*rk.parts.weights, *rk.parts.backend, tp > 1 ? rk.parts.comm.get() : nullptr);
    rk.cache = std::make_unique<KvCache>(rk.model->kv_cache_spec(num_blocks, block_size, kv_dtype));
    rk.stage = std::make_unique<PipelineStage>(*rk.model, *rk.cache, rk.parts.world.get(), pos, micro);
    ranks_.push_back(std::move(rk));
  }
  runner_ = std::make_unique<ModelRunner>(*ranks_[0].model, *ranks_[0].cache);
  for (int r = 1; r < n; ++r) threads_.emplace_back([this, r] { rank_main(r); });
}

TpModelRunner::~TpModelRunner() {
  stop_ = true;
  epoch_.fetch_add(1, std::memory_order_release);
  epoch_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void TpModelRunner::rank_main(int r) {
  const StagePosition& pos = ranks_[size_t(r)].stage->position();
  prof::name_this_thread(pos.pp > 1 ? str_cat(track_prefix_, "pp stage ", pos.stage, " tp rank ", pos.tp_rank)
                                    : str_cat(track_prefix_, "tp rank ", r));
  uint64_t seen = 0;
  Rank& rk = ranks_[size_t(r)];
  while (true) {
    wait_change(epoch_, seen);
    seen = epoch_.load(std::memory_order_acquire);
    if (stop_) return;
    try {
      if (task_) (*task_)(r);
      else rk.stage->run(*batch_, nullptr);  // its logits go to rank 0
    } catch (...) {
      rk.error = std::current_exception();
    }
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_all();
  }
}

void TpModelRunner::capture_normed_hidden(std::vector<float>* out) {
  // The last stage's TP rank 0 (rank 0 itself with one stage) writes it from its own thread; the
  // step's end (pending_) orders that before the caller reads it.
  ranks_[size_t(last_stage_rank0())].stage->capture_normed_hidden(out);
}

void TpModelRunner::run_all(const std::function<void()>& rank0) {
  const int n = this->ranks();
  for (Rank& rk : ranks_) rk.error = nullptr;  // one rank too: a failed step's error is not rethrown by the next
  if (n > 1) {
    if (!engine_thread_named_) {  // rank 0 runs on the thread that calls execute()
      prof::name_this_thread(str_cat(track_prefix_, "tp rank 0 (engine)"));
      engine_thread_named_ = true;
    }
    pending_.store(n - 1, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_release);
    epoch_.notify_all();
  }
  try {
    rank0();
  } catch (...) {
    ranks_[0].error = std::current_exception();
  }
  if (n > 1) {
    for (int left = pending_.load(std::memory_order_acquire); left != 0; left = pending_.load(std::memory_order_acquire))
      wait_change(pending_, left);
  }
  for (Rank& rk : ranks_)
    if (rk.error) std::rethrow_exception(rk.error);
}

void TpModelRunner::run_on_ranks(const std::function<void(int)>& fn) {
  task_ = &fn;
  try {
    run_all([&] { fn(0); });
  } catch (...) {
    task_ = nullptr;
    throw;
  }
  task_ = nullptr;
}

void TpModelRunner::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  const ForwardBatch& batch = runner_->build_batch(so);
  last_batch_ = &batch;
  Rank& r0 = ranks_[0];
  out.vocab_size = r0.model->output_width();  // the vocabulary, or a pooling head's width
  out.logits.resize(static_cast<size_t>(batch.num_logits() * out.vocab_size));
  if (batch.num_tokens() == 0) return;
  // The other ranks read the same batch, logits rows included (each computes the logits of its
  // vocabulary rows); it stays unchanged until they are done. Every rank validates the same
  // ids and slots before its first collective, so a bad batch throws on all ranks and none
  // waits in an all-reduce.
  batch_ = &batch;
  if (!aux_out_) {
    run_all([&] { r0.stage->run(batch, out.logits.data()); });
    return;
  }
  // Sized here, on the engine thread, before the ranks are woken: the stages write into it at once.
  aux_out_->resize(size_t(batch.num_tokens() * int64_t(aux_layers_.size()) * r0.model->hidden_size()));
  set_stage_aux_capture(aux_out_->data());
  try {
    run_all([&] { r0.stage->run(batch, out.logits.data()); });
  } catch (...) {
    set_stage_aux_capture(nullptr);
    throw;
  }
  set_stage_aux_capture(nullptr);
}

void TpModelRunner::set_stage_aux_capture(float* rows) {
  for (int r = 0; r < ranks(); r += tp()) ranks_[size_t(r)].stage->capture_aux_hidden(rows ? aux_layers_ : std::vector<int32_t>{}, rows);
}

}  // namespace pypto
