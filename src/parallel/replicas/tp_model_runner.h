#pragma once
// The executor of one replica whose model is split over tp ranks (tensor parallelism). Each step
// the block tables and the ForwardBatch are built once, then every rank runs the same batch in
// lockstep on its own thread: its own weight slice (its query/KV heads and MLP columns), its own
// backend (threads pinned to its core group), its own share of the KV cache (its KV heads, the
// same block ids on every rank) and a communicator that all-reduces the partial o_proj/down_proj
// outputs and the vocab-parallel embeddings. lm_head is vocab-parallel too: every rank computes
// the logits of its vocabulary rows and rank 0 gathers them into the step's [rows, vocab] logits
// (Qwen3Model::kLogitsRank). With tp == 1 this is the plain single-rank ModelRunner.
//
// Pipeline parallelism (pp > 1, parallel/replicas/pipeline_stage.h): the replica has pp × tp
// rank threads, rank stage * tp + t running stage `stage`'s layers as its TP rank t; each step's
// batch goes through the stages in micro-batches, the last stage's logits back to rank 0.
//
// Profiling: rank r's thread is the trace track "tp rank r" (rank 0 is the engine thread that
// calls execute(): "tp rank 0 (engine)"), prefixed by `track_prefix` ("replica 1 " under dp).
#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/model_executor.h"
#include "engine/model_runner.h"
#include "kernels/backend.h"
#include "model/kv_cache.h"
#include "model/qwen3_model.h"
#include "model/qwen3_weights.h"
#include "parallel/communicator.h"
#include "parallel/replicas/pipeline_stage.h"

namespace pypto {

// What one rank is made of. weights->tp_rank must equal the rank's index.
struct TpRankParts {
  std::unique_ptr<Backend> backend;            // threads pinned to this rank's cores
  std::shared_ptr<const Qwen3Weights> weights;  // read-only, may be shared with other replicas
  std::unique_ptr<Communicator> comm;           // its stage's TP group; null when tp == 1
  std::unique_ptr<Communicator> world;          // pp > 1: the replica's pp × tp ranks (point-to-point)
};

class TpModelRunner : public ModelExecutor {
 public:
  // Allocates every rank's KV cache ([num_blocks, rank's KV heads, block_size, head_dim] per
  // layer of its stage) and starts pp·tp - 1 rank threads (rank 0 runs on the caller of execute()).
  // ranks: pp × tp of them, in pipeline rank order.
  TpModelRunner(std::vector<TpRankParts> ranks, int64_t num_blocks, int32_t block_size, DType kv_dtype,
                std::string track_prefix = "", int pp = 1, MicroBatchPolicy micro = {});
  ~TpModelRunner() override;

  void execute(const SchedulerOutput& so, ExecutorOutput& out) override;
  // Rank 0's threads (the engine thread's pool); the other ranks idle between steps.
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override { runner_->parallel_rows(n, fn); }

  int ranks() const { return static_cast<int>(ranks_.size()); }  // pp × tp
  // Every rank's KV cache (KvCache::prefault).
  void prefault_kv_caches() {
    for (Rank& rk : ranks_) rk.cache->prefault();
  }
  // Bytes of rank r's KV cache.
  size_t kv_bytes(int r) const { return ranks_[size_t(r)].cache->bytes(); }

  // Speculative decoding with the MTP head (parallel/replicas/mtp_tp_executor.h). While `out` is
  // set, execute() also writes the final normed hidden state of every row of the step,
  // [batch.num_tokens(), hidden] (the last stage's TP rank 0's: every TP rank holds the same after
  // the final all-reduce), into *out (resized). Null: off.
  void capture_normed_hidden(std::vector<float>* out);
  // Speculative decoding with an EAGLE-3 head (parallel/replicas/eagle3_tp_executor.h). While
  // `out` is set, execute() also writes the residual stream of every row of the step entering
  // each layer of `layers` into *out, resized to [batch.num_tokens(), layers.size() * hidden]
  // (Qwen3Model::set_aux_hidden_out's layout): TP rank 0 of each stage writes the column blocks
  // of the layers its stage holds (every TP rank holds the same residual stream after the
  // all-reduces). Null: off.
  void capture_aux_hidden(std::vector<int32_t> layers, std::vector<float>* out) {
    aux_layers_ = std::move(layers);
    aux_out_ = out;
  }
  int pp() const { return pp_; }
  int tp() const { return ranks() / pp_; }
  // The last pipeline stage's TP rank 0 (0 with one stage).
  int last_stage_rank0() const { return ranks() - tp(); }
  // The batch of the last execute() (valid until the next one).
  const ForwardBatch& last_batch() const { return *last_batch_; }
  // Runs fn(r) for every rank r at once, rank 0 on the calling (engine) thread and the others on
  // their rank threads, between steps; rethrows a rank's error once all are done. Work that runs
  // collectives must throw on every rank or on none (as a step's batch checks do).
  void run_on_ranks(const std::function<void(int)>& fn);
  // Rank r's parts, for work run with run_on_ranks.
  const Qwen3Weights& weights(int r) const { return *ranks_[size_t(r)].parts.weights; }
  Backend& backend(int r) const { return *ranks_[size_t(r)].parts.backend; }
  Communicator* comm(int r) const { return ranks_[size_t(r)].parts.comm.get(); }

 private:
  struct Rank {
    TpRankParts parts;
    std::unique_ptr<Qwen3Model> model;
    std::unique_ptr<KvCache> cache;
    std::unique_ptr<PipelineStage> stage;
    std::exception_ptr error;
  };
  void rank_main(int r);
  // Wakes the rank threads for the current epoch's work (a step, or task_), runs rank 0's part
  // with `rank0`, waits for the others and rethrows the first error.
  void run_all(const std::function<void()>& rank0);

  std::vector<Rank> ranks_;
  std::unique_ptr<ModelRunner> runner_;  // rank 0: block tables and the batch
  const ForwardBatch* batch_ = nullptr;  // the current step's batch, read by every rank
  const ForwardBatch* last_batch_ = nullptr;
  const std::function<void(int)>* task_ = nullptr;  // run_on_ranks: this instead of a step
  std::vector<int32_t> aux_layers_;  // capture_aux_hidden
  std::vector<float>* aux_out_ = nullptr;
  // Points (or, with null, stops pointing) each stage's TP rank 0 at the step's aux rows.
  void set_stage_aux_capture(float* rows);
  int pp_ = 1;
  std::string track_prefix_;
  bool engine_thread_named_ = false;
  std::vector<std::thread> threads_;
  alignas(64) std::atomic<uint64_t> epoch_{0};  // bumped once per step (and at shutdown)
  alignas(64) std::atomic<int> pending_{0};     // rank threads still running the current step
  bool stop_ = false;
};

}  // namespace pypto
