#pragma once
// Tensor-parallel and pipeline ranks that are processes (--distributed-executor-backend mp|mpi). Rank 0 holds
// the engine (scheduler, sampler, HTTP) and a ProcessTpExecutor; every other rank runs
// run_rank_worker(): it stages its own weight slice from its own host's copy of the checkpoint,
// then runs its slice of the model on each batch rank 0 sends, until rank 0 says stop.
//
// The protocol (every rank of a group makes the same calls in the same order):
//   start-up, over every rank of every replica: exchange_load_status() (each rank in turn
//             broadcasts ok or its error with its host), broadcast of the KV cache's block count
//             (rank 0 plans it);
//   per step, over one replica's ranks: broadcast of a StepHeader {kind, bytes} from the replica's
//             first rank, then of the encoded ForwardBatch (batch_codec.h), then the forward pass
//             with its collectives (--dp: replica i > 0's first rank got them from rank 0 first,
//             replica_link.h);
//   --speculative-config method mtp (--dp 1): between steps, StepHeaders of kind kMtpPassMessage
//             with the drafter's passes, and under --pp the step's hidden rows from the last
//             stage to rank 0 after each step (mtp_rank_pass.h);
//   --speculative-config method eagle3 (--tp, one stage, --dp 1): between steps, StepHeaders of
//             kind kEagle3EmbeddingMessage with the token ids whose embedding rows the head
//             reads (eagle3_rank_pass.h);
//   shutdown: a StepHeader of kind Stop.
#include <memory>
#include <string>

#include "engine/model_executor.h"
#include "engine/model_runner.h"
#include "kernels/backend.h"
#include "model/kv_cache.h"
#include "model/qwen3_model.h"
#include "model/qwen3_weights.h"
#include "parallel/communicator.h"
#include "parallel/replicas/pipeline_stage.h"

namespace pypto {

struct ReplicaLoadOptions;

// Every rank calls this once after staging with "" (loaded) or its error. Returns normally when
// every rank loaded; otherwise throws Error on every rank naming each failed rank, its host and its
// reason ("rank 1 on host-b: /models/q/model.safetensors: No such file or directory").
void exchange_load_status(Communicator& comm, const std::string& my_error);

// Rank 0's executor: builds each step's batch, sends it to the other ranks and runs slice 0 (whose
// communicator gathers the full logits onto rank 0). Sends Stop when destroyed.
class ProcessTpExecutor : public ModelExecutor {
 public:
  // comm: every rank of the replica (pp × tp); stage_comm: rank 0's stage's TP group when pp > 1
  // and tp > 1 (else the model's collectives use comm, or none).
  ProcessTpExecutor(std::unique_ptr<Backend> backend, std::shared_ptr<const Qwen3Weights> weights,
                    std::shared_ptr<Communicator> comm, std::shared_ptr<Communicator> stage_comm, int pp,
                    MicroBatchPolicy micro, int64_t num_blocks, int32_t block_size, DType kv_dtype);
  ~ProcessTpExecutor() override;
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override;
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override { runner_->parallel_rows(n, fn); }
  size_t kv_bytes() const { return cache_->bytes(); }
  void prefault_kv_cache() { cache_->prefault(); }
  // --speculative-config method mtp (parallel/replicas/mtp_rank_pass.h): the batch of the last
  // execute() (valid until the next), and with one stage the step's final normed hidden rows
  // captured into *out while set (PipelineStage::capture_normed_hidden).
  const ForwardBatch& last_batch() const { return *last_batch_; }
  void capture_normed_hidden(std::vector<float>* out) { stage_->capture_normed_hidden(out); }
  // --speculative-config method eagle3 (parallel/replicas/eagle3_rank_pass.h), one stage: while
  // `out` is set, execute() also writes the residual stream entering each of `layers` for every
  // row into *out, resized to [rows, layers.size() × hidden] (rank 0 holds the whole stream after
  // each all-reduce). Rank 0's parts, for the head it runs between the steps.
  void capture_aux_hidden(std::vector<int32_t> layers, std::vector<float>* out) {
    aux_layers_ = std::move(layers);
    aux_out_ = out;
  }
  Backend& backend() { return *backend_; }
  const Qwen3Weights& weights() const { return *weights_; }
  Communicator& comm() { return *comm_; }

 private:
  std::unique_ptr<Backend> backend_;
  std::shared_ptr<const Qwen3Weights> weights_;
  std::shared_ptr<Communicator> comm_;
  std::shared_ptr<Communicator> stage_comm_;
  std::unique_ptr<Qwen3Model> model_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<PipelineStage> stage_;
  std::vector<uint8_t> message_;
  const ForwardBatch* last_batch_ = nullptr;
  std::vector<int32_t> aux_layers_;  // capture_aux_hidden
  std::vector<float>* aux_out_ = nullptr;
};

// Rank 0's start-up (load_replicas() with opt.process_comm set): stages slice 0, exchanges the
// load status, plans the KV pool and sends its block count, and returns the engines: replica 0's
// over a ProcessTpExecutor, replica i > 0's (--dp) over a RemoteReplicaExecutor on its link
// (replica_link.h), all behind the router.
LoadedEngine load_process_rank0(const ReplicaLoadOptions& opt);

// Ranks ≥ 1 (opt.process_comm, replica_comm, stage_comm and link_comms set): load (opt.layout's
// cores of this rank, its weight slice), then serve steps until Stop. A replica's first rank under
// --dp gets each step from rank 0 over its link, runs it with its replica as rank 0 of it, and
// sends the logits back. Returns the process exit code (0 after Stop; a load failure throws Error).
int run_rank_worker(const ReplicaLoadOptions& opt);

}  // namespace pypto
