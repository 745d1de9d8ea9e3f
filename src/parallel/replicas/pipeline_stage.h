#pragma once
// Pipeline parallelism (--pp N): the decoder layers are split into N stages, each held by its own
// tensor-parallel group of tp ranks (a replica has pp × tp ranks; rank stage * tp + t is stage
// `stage`'s TP rank t). The first stage also holds the embedding, the last the final norm and
// lm_head; stages are balanced by their staged bytes. Each stage owns the KV cache of its own
// layers (every stage uses the same block ids, so all agree on one block count).
//
// One engine step on every rank (PipelineStage::run): the step's batch is split into up to M
// micro-batches of whole sequences (--pp-micro-batches; MicroBatchPolicy below); for each, stage s > 0 receives the
// residual stream [tokens, hidden] f32 from stage s-1's rank with the same TP index, runs its
// layers and sends it on to stage s+1. The last stage computes the logits (gathered onto its TP
// rank 0), keeps them, and after the last micro-batch sends all of the step's logits [rows, vocab]
// to rank 0 (stage 0, TP rank 0, which holds the engine). So while stage s+1 works on micro-batch
// i, stage s works on i+1: with M micro-batches a step of N stages takes about (M + N - 1) stage
// times of 1/M of the batch instead of N whole-batch stage times.
//
// Messages only flow forward (stage s → s+1, then the last stage → rank 0 once per step), so
// the schedule cannot deadlock even when every send waits for its receiver (Communicator::send).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/qwen3_model.h"
#include "model/weight_staging.h"
#include "parallel/communicator.h"

namespace pypto {

// How a step's batch is cut into micro-batches (--pp-micro-batches, --pp-micro-batch-tokens): into
// at most max_parts parts, each of at least min_tokens tokens (fewer parts when the step has fewer
// tokens). Every part streams the stage's weights once more, so a part must carry enough tokens to
// be compute-bound: a decode step of 16 sequences on a CPU is bound by the weights' bytes, and
// split in 4 it took 2.8x longer on stage-per-core qwen3-0.6b, while a 4940-token prefill split in
// 4 ran 2x faster (bench/parallel/README.md).
inline constexpr int kDefaultPipelineMicroBatches = 4;
inline constexpr int64_t kDefaultMicroBatchMinTokens = 64;
struct MicroBatchPolicy {
  int max_parts = kDefaultPipelineMicroBatches;
  int64_t min_tokens = kDefaultMicroBatchMinTokens;
  // The number of parts for a step of `tokens` tokens.
  int parts(int64_t tokens) const {
    const int64_t by_size = min_tokens > 0 ? tokens / min_tokens : tokens;
    return int(std::max<int64_t>(1, std::min<int64_t>(max_parts, by_size)));
  }
};

// Where one rank sits in its replica.
struct StagePosition {
  int pp = 1, tp = 1, stage = 0, tp_rank = 0;
  int rank() const { return stage * tp + tp_rank; }  // in the replica's pp × tp ranks
  bool first() const { return stage == 0; }
  bool last() const { return stage == pp - 1; }
  static StagePosition of_rank(int rank, int pp, int tp) { return {pp, tp, rank / tp, rank % tp}; }
};

// Splits num_layers layers into pp contiguous non-empty stages minimising the largest stage's
// bytes: a layer costs layer_bytes, the first stage also first_extra (the embedding), the last
// also last_extra (final norm + lm_head). Error when pp is not in [1, num_layers].
std::vector<LayerRange> balance_pipeline_stages(int num_layers, int pp, int64_t layer_bytes, int64_t first_extra,
                                                int64_t last_extra);
// The same with the byte counts of this checkpoint staged for TP rank 0 of tp on `stager`
// (staged_slab_bytes). Error naming --pp, its value and the layer count when pp is too large.
std::vector<LayerRange> plan_pipeline_stages(const Checkpoint& ck, const Backend& stager, int tp, int pp,
                                             const StagedFormats* formats);

// Splits `batch` into at most m micro-batches of contiguous whole sequences, balanced by tokens
// (fewer when it has fewer sequences; one when its logits rows are not in row order). The
// micro-batches' logits rows, concatenated, are the batch's logits rows in order.
void split_micro_batches(const ForwardBatch& batch, int m, std::vector<ForwardBatch>& out);

class PipelineStage {
 public:
  // `model` holds this stage's layers, `cache` their KV; `world` connects the replica's pp × tp
  // ranks in StagePosition::rank() order (null when pp == 1); the model's own communicator is
  // the stage's TP group.
  PipelineStage(Qwen3Model& model, KvCache& cache, Communicator* world, StagePosition pos, MicroBatchPolicy micro);

  // Runs one step's batch through this stage (every rank of the replica calls it with the same
  // batch). logits_out [batch.num_logits(), vocab] is written on rank 0 only. A bad batch throws
  // the same Error on every rank before anything is sent.
  void run(const ForwardBatch& batch, float* logits_out);

  const StagePosition& position() const { return pos_; }

  // Speculative decoding with the MTP head (parallel/replicas/mtp_tp_executor.h), on a last
  // stage: while `out` is set, run() also writes the final normed hidden state of every row of
  // the step, [batch.num_tokens(), hidden], into *out (resized; each micro-batch its rows).
  void capture_normed_hidden(std::vector<float>* out) { capture_ = out; }
  // Speculative decoding with an EAGLE-3 head (parallel/replicas/eagle3_tp_executor.h): while
  // `out` is set, run() also writes the residual stream entering each of `layers` that this
  // stage holds into its column block of out [batch.num_tokens(), layers.size() * hidden]
  // (Qwen3Model::set_aux_hidden_out; each micro-batch its rows). The caller sizes `out` for the
  // step before run(); the stages write disjoint column blocks of it. Null: off.
  void capture_aux_hidden(std::vector<int32_t> layers, float* out) {
    aux_layers_ = std::move(layers);
    aux_out_ = out;
  }

 private:
  Qwen3Model& model_;
  KvCache& cache_;
  Communicator* world_;
  StagePosition pos_;
  MicroBatchPolicy micro_;
  std::vector<ForwardBatch> parts_;
  std::vector<float> hidden_in_, hidden_out_, logits_;
  std::vector<float>* capture_ = nullptr;
  std::vector<int32_t> aux_layers_;  // capture_aux_hidden
  float* aux_out_ = nullptr;
};

}  // namespace pypto
