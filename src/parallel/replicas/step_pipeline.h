#pragma once
// Consecutive engine steps in flight together through the pipeline stages (--pp-virtual-engines;
// ranks as processes, --dp 1): vLLM's "virtual engines". The replica runs pp engines, each with
// its own scheduler, its own sequences and its own 1/pp of the KV blocks (disjoint block ids in
// one cache), behind the router as data-parallel replicas are. Their steps share the stages: while
// stage 1 runs engine A's step, stage 0 already runs engine B's, and engine A samples and
// schedules meanwhile. Without them a step goes through stage 0, then stage 1, then the engine,
// and each of those idles while the others work.
//
// Protocol (point-to-point messages flow forward only; the logits come back on a link of their
// own, so a stage sending logits never waits on rank 0 sending the next step):
//   rank 0 (stage 0, TP rank 0), one pipeline thread, per submitted step in submission order:
//     [stage 0 has TP peers: broadcast StepHeader and the encoded batch in its TP group], run stage
//     0's layers, send StepHeader + batch to stage 1's TP rank 0, and each TP rank its hidden
//     states [tokens, hidden] f32 to stage 1's rank of the same TP index.
//   stage s > 0: TP rank 0 receives StepHeader + batch from stage s-1's TP rank 0 and broadcasts
//     them in its TP group; every rank receives its hidden states, runs its layers and passes the
//     step on the same way, or, on the last stage, TP rank 0 sends the logits [rows, vocab] to
//     rank 0 over the return link (none when the step samples no row).
//   stop: a StepHeader of kind Stop passed down the same way.
// With the MTP drafter (--speculative-config method mtp; enable_mtp()): the last stage's TP rank 0
// also sends each step's final normed hidden rows [tokens, hidden] f32 after its logits; and an
// engine's drafter pass is a job of its own (StepHeader {kMtpPassMessage, bytes}, the message of
// mtp_rank_pass.h: batch and hidden rows), in the same order as the steps: stage 0's ranks look
// the embedding rows e [tokens, hidden] up (vocab-parallel over their TP group) and send the
// message and e on, each to the next stage's rank of the same TP index; the stages between pass
// both on; the last stage's ranks run the MTP head over their slice (MtpHead, its own KV pool
// holding every engine's blocks) and its TP rank 0 returns the logits [rows, vocab] and the
// head's outputs [tokens, hidden] over the return link.
// With an EAGLE-3 head (enable_aux_capture(); threads backend only): rank 0 captures the residual
// stream entering the aux layers stage 0 holds into a [tokens, aux × hidden] f32 buffer (zero
// elsewhere) and sends it after its hidden states to stage 1's TP rank 0; each stage's TP rank 0
// fills in the column blocks of its own aux layers and passes it on, and the last stage's returns
// it after the logits (Qwen3Model::set_aux_hidden_out's layout).
// The stages run steps in submission order, so rank 0 receives logits in that order; each caller
// of StepPipeline::run() takes its logits when its turn comes. Every step's rows are whole
// sequences of one engine, and a row's logits do not depend on the batch it is in, so the
// output equals one rank's.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/block_tables.h"
#include "engine/model_executor.h"
#include "kernels/backend.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/qwen3_model.h"
#include "model/qwen3_weights.h"
#include "parallel/communicator.h"
#include "parallel/replicas/pipeline_stage.h"
#include "parallel/replicas/tp_model_runner.h"

namespace pypto {

// Rank 0's side: owns stage 0's TP rank 0 (backend, weights, model, KV cache of every engine's
// blocks) and the thread that runs it.
class StepPipeline {
 public:
  // world: the replica's pp × tp ranks (point-to-point); stage_comm: stage 0's TP group (null
  // when tp == 1); back: the return link (rank 0 and the last stage's TP rank 0, rank 1 of it).
  StepPipeline(std::unique_ptr<Backend> backend, std::shared_ptr<const Qwen3Weights> weights,
               std::shared_ptr<Communicator> world, std::shared_ptr<Communicator> stage_comm,
               std::shared_ptr<Communicator> back, int pp, int64_t num_blocks, int32_t block_size, DType kv_dtype);
  // Sends Stop down the pipeline (unless a rank fault was recorded) and joins the thread.
  ~StepPipeline();

  // Runs `batch` through every stage and writes its logits [batch.num_logits(), vocab] to
  // logits_out. Thread-safe: the engines call it from their own threads, and up to pp of their
  // steps are in flight together. A bad batch throws here, before anything is sent.
  // With enable_mtp(): hidden_out [batch.num_tokens(), hidden] receives the step's final normed
  // hidden rows; with enable_aux_capture(): [batch.num_tokens(), aux × hidden], the aux rows
  // (required then; ignored otherwise).
  void run(const ForwardBatch& batch, float* logits_out, float* hidden_out = nullptr);

  // The MTP drafter: every stage rank runs its part (run_pipelined_stage's PipelinedMtp); call
  // before the first run().
  void enable_mtp() { mtp_ = true; }
  // The EAGLE-3 drafter: every stage's TP rank 0 captures the residual stream entering the aux
  // `layers` it holds (make_threaded_step_pipeline's aux_layers); call before the first run().
  void enable_aux_capture(std::vector<int32_t> layers) { aux_layers_ = std::move(layers); }
  // One pass of the MTP head over `batch` (the MTP rows: their KV slots in the last stage's MTP
  // pool) with hidden rows [T, H]; fills logits [batch.num_logits(), vocab] and out [T, H] (sized
  // by the caller). Thread-safe like run(); a token id outside the vocabulary throws before
  // anything is sent.
  void run_mtp_pass(const ForwardBatch& batch, const std::vector<float>& hidden, std::vector<float>& logits,
                    std::vector<float>& out);

  // The draft model (--speculative-config draft_model): each engine's drafter runs unsharded on
  // stage 0's TP rank 0, the pipeline's own pool (backend()); run_on_stage0 runs `fn` (a draft
  // pass) on the pipeline thread between the steps it sends, in submission order, and returns
  // when it has run, rethrowing what it threw. Nothing is sent to the other stages. Thread-safe.
  Backend& backend() { return *backend_; }
  void run_on_stage0(const std::function<void()>& fn);

  void prefault_kv_cache() { cache_->prefault(); }
  // Stage 0's TP rank 0 slice (its embedding), for work run with run_on_stage0.
  const Qwen3Weights& weights() const { return *weights_; }
  int64_t vocab_size() const { return model_->vocab_size(); }

 private:
  struct Job {
    const ForwardBatch* batch = nullptr;
    const std::vector<float>* mtp_hidden = nullptr;  // an MTP pass's input rows (null: a target step)
    const std::function<void()>* local = nullptr;    // run_on_stage0's work (no results to collect)
    uint64_t ticket = 0;
    bool sent = false;  // the pipeline thread is done with it (batch no longer read)
    std::exception_ptr error;
  };
  void thread_main();
  void send_step(const ForwardBatch& batch);
  void send_mtp_pass(const ForwardBatch& batch, const std::vector<float>& hidden);
  void send_stop();
  // Queues `job`, waits until it is sent and its results are next to come back, runs `collect`
  // (receiving them) unless sending failed, and lets the next job collect.
  void submit_and_collect(Job& job, const std::function<void()>& collect);

  std::unique_ptr<Backend> backend_;
  std::shared_ptr<const Qwen3Weights> weights_;
  std::shared_ptr<Communicator> world_, stage_comm_, back_;
  StagePosition pos_;
  std::unique_ptr<Qwen3Model> model_;
  std::unique_ptr<KvCache> cache_;
  std::vector<uint8_t> message_;
  std::vector<float> hidden_;
  bool mtp_ = false;
  std::vector<int32_t> aux_layers_;  // enable_aux_capture
  std::vector<float> aux_;           // [T, aux × H] a step's aux rows (stage 0's columns)
  std::vector<float> mtp_e_;           // [T, H] an MTP pass's embedding rows (stage 0's)
  std::vector<int32_t> mtp_local_ids_;  // scratch of the lookup

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> queue_;
  uint64_t next_ticket_ = 0;   // the next submitted step's
  uint64_t next_collect_ = 0;  // the step whose logits come back next
  bool stop_ = false;
  std::thread thread_;
};

// A virtual engine's share of the stages' pools: its KV block ids [block_offset, + its blocks) of
// every stage's cache, and on a hybrid (Gated DeltaNet) model its own run of state slots
// [state_slot_offset, + state_slots) and snapshot entries [snapshot_offset, + its snapshots) of
// every stage's state pool, which holds each engine's (load_replicas.h set_hybrid_state_pool).
// The rollback states of speculative decoding are kept per slot, so they come with the slots.
struct VirtualEngineShare {
  int32_t block_offset = 0;
  int32_t state_slots = 0;  // 0: a model without a recurrent state
  int32_t state_slot_offset = 0;
  int32_t snapshot_offset = 0;
};

// One virtual engine's executor on rank 0: its own block tables (and state slots), its block ids,
// state slots and snapshot entries shifted into the shared pools by its share, its steps run
// through the shared pipeline. The sampler's rows run on the engine's thread (rank 0's compute
// threads belong to the pipeline thread).
class VirtualEngineExecutor : public ModelExecutor {
 public:
  VirtualEngineExecutor(std::shared_ptr<StepPipeline> pipeline, const VirtualEngineShare& share, int32_t block_size);
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override;

  // The MTP drafter (the pipeline's enable_mtp()): after each step, `fn` gets the step's output,
  // its batch and its final normed hidden rows [T, H] (MtpProposer::observe).
  using ObserveHidden = std::function<void(const SchedulerOutput&, const ForwardBatch&, const float*)>;
  void observe_hidden(ObserveHidden fn, int64_t hidden_size) {
    observe_ = std::move(fn);
    hidden_size_ = hidden_size;
  }

 private:
  ObserveHidden observe_;
  int64_t hidden_size_ = 0;
  std::vector<float> hidden_;  // [T, H] of the step (with observe_)
  std::shared_ptr<StepPipeline> pipeline_;
  VirtualEngineShare share_;
  int32_t block_size_;
  BlockTables tables_;
  ForwardBatch batch_;
};

// --distributed-executor-backend threads: one replica's pp × tp ranks (`ranks`, in pipeline rank
// order, their `comm` and `world` set as for TpModelRunner) with ranks 1.. as threads of this
// process running run_pipelined_stage() over in-process communicators, and rank 0's pipeline,
// which is returned and owns them (destroying it stops and joins them).
// mtp_blocks > 0: the MTP drafter's pool on the last stage (every engine's), the pipeline's
// enable_mtp() called. aux_layers (EAGLE-3): the layers whose entering residual stream each step
// brings back (enable_aux_capture; empty: none).
std::shared_ptr<StepPipeline> make_threaded_step_pipeline(std::vector<TpRankParts> ranks, int pp, int64_t num_blocks,
                                                          int32_t block_size, DType kv_dtype,
                                                          const std::string& track_prefix, int64_t mtp_blocks = 0,
                                                          std::vector<int32_t> aux_layers = {});

// A stage rank's part of the MTP drafter's passes (the protocol above): `weights` is the rank's
// slice (staged with the MTP layer on the last stage; the embedding on the first); the last
// stage's ranks hold an MTP KV pool of `blocks` (every virtual engine's) of block_size.
struct PipelinedMtp {
  const Qwen3Weights* weights = nullptr;  // null: no MTP
  int64_t blocks = 0;
  int32_t block_size = 0;
  DType kv_dtype = DType::F32;
};

// A stage rank other than rank 0 under --pp-virtual-engines: runs steps (and MTP passes) as they
// come until Stop (the protocol above). back: the return link on the last stage's TP rank 0, else
// null. aux_layers: the EAGLE-3 aux layers (the pipeline's enable_aux_capture; empty: none).
// Returns 0 after Stop.
int run_pipelined_stage(Qwen3Model& model, KvCache& cache, Communicator& world, Communicator* stage_comm,
                        Communicator* back, StagePosition pos, const PipelinedMtp& mtp = {},
                        const std::vector<int32_t>& aux_layers = {});

}  // namespace pypto
