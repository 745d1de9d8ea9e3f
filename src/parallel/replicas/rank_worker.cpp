#include "parallel/replicas/rank_worker.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/kv_dtype.h"
#include "core/log.h"
#include "core/memory.h"
#include "engine/draft_model_proposer.h"
#include "engine/engine.h"
#include "io/checkpoint.h"
#include "model/weight_staging.h"
#include "parallel/mpi_communicator.h"
#include "parallel/rank_health.h"
#include "parallel/replicas/batch_codec.h"
#include "parallel/replicas/draft_load.h"
#include "parallel/replicas/eagle3_load.h"
#include "parallel/replicas/eagle3_rank_pass.h"
#include "parallel/replicas/load_replicas.h"
#include "parallel/replicas/mtp_load.h"
#include "parallel/replicas/mtp_rank_pass.h"
#include "parallel/replicas/mtp_virtual_engines.h"
#include "parallel/replicas/replica_link.h"
#include "parallel/replicas/step_pipeline.h"

namespace pypto {
namespace {

constexpr int64_t kStep = kStepMessage, kStop = kStopMessage;  // StepHeader kinds (replica_link.h)

// A rank's compute backend: threads pinned to its core group (mp on one host), or every core this
// process may use (mpi: mpirun's binding decides).
int rank_threads(const ReplicaLoadOptions& opt, int rank) {
  const ParallelLayout& L = opt.layout;
  if (opt.engine.threads > 0) return opt.engine.threads;
  return L.pinned ? static_cast<int>(L.rank_cores(0, rank).size()) : cpu_count();
}
std::unique_ptr<Backend> rank_backend(const ReplicaLoadOptions& opt, int rank) {
  const EngineLoadOptions& eo = opt.engine;
  const ParallelLayout& L = opt.layout;
  return make_cpu_backend(rank_threads(opt, rank), L.pinned ? L.rank_cores(0, rank) : std::vector<int>{},
                          eo.matmul_precision, eo.cpu_linear_kernel);
}

// Opens this host's copy of the checkpoint, checks that this rank's slice (its TP share of its
// pipeline stage's layers) fits this host's free memory and stages it. Errors say which file or
// how many bytes, or that --pp exceeds the layer count. engine_rank: this is rank 0 (it logs the
// stages and shows the staging progress; the first ranks of other --dp replicas do not). engines:
// the engines sharing this rank (--pp-virtual-engines: pp), each with its own hybrid state slots.
std::shared_ptr<const Qwen3Weights> stage_own_slice(const EngineLoadOptions& eo, const StagePosition& pos,
                                                    bool engine_rank, int32_t engines) {
  const int rank = pos.tp_rank, tp = pos.tp;
  auto ck = Checkpoint::open(eo.model_dir, eo.hf_overrides);
  validate_qwen3_checkpoint(*ck);
  if (ck->headless() || ck->config().pooling.pooling())  // pooling models: parallel/replicas/pooling_load.h
    fail(ck->dir(), ": an embedding / reranker model runs its --tp / --pp ranks as threads of one process: add "
         "--distributed-executor-backend threads (or --runner pooling / rerank, which picks it)");
  const ModelConfig& cfg = ck->config();
  check_max_model_len(cfg, eo.scheduler.max_model_len);
  if (cfg.num_key_value_heads % tp != 0)
    fail("--tp ", tp, " does not divide num_key_value_heads (", cfg.num_key_value_heads,
         "): each rank holds an equal share of the KV heads; use a --tp that divides it");
  if (eo.weight_dtype && ck->get("model.embed_tokens.weight").info->dtype != *eo.weight_dtype)
    fail("--dtype asks for ", dtype_name(*eo.weight_dtype), " weights but the checkpoint's are ",
         dtype_name(ck->get("model.embed_tokens.weight").info->dtype), ": leave out --dtype or pass --dtype auto");
  auto stager = make_cpu_backend(cpu_count(), {}, eo.matmul_precision, eo.cpu_linear_kernel);
  const StagedFormats formats = staged_formats_for(*ck, eo);  // --quantization, --enable-expert-parallel
  if (rank == 0 && formats.layers != WeightFormat::Float) log_info("weights: ", formats.describe());
  const LayerRange range = plan_pipeline_stages(*ck, *stager, tp, pos.pp, &formats)[size_t(pos.stage)];
  if (pos.pp > 1 && engine_rank) {
    std::string s;
    for (const LayerRange& r : plan_pipeline_stages(*ck, *stager, tp, pos.pp, &formats))
      s += str_cat(s.empty() ? "" : ", ", "layers ", r.begin, "-", r.end - 1);
    log_info("pipeline stages: ", s);
  }
  const size_t need = staged_slab_bytes(*ck, *stager, rank, tp, -1, &formats, range), have = available_memory_bytes();
  if (need > have) {
    char n[32], a[32];
    fail(ck->dir(), ": this rank's weight slice needs ", format_bytes(need, n, sizeof n), " but this host has ",
         format_bytes(have, a, sizeof a), " available (MemAvailable)");
  }
  StagingOptions so;
  so.tp_rank = rank;
  so.tp_size = tp;
  so.layer_begin = range.begin;
  so.layer_end = range.end;
  so.show_progress = eo.show_progress && engine_rank;
  so.compile_cache_dir = eo.compile_cache_dir;
  so.quantization = eo.quantization;
  so.expert_parallel = eo.expert_parallel;
  so.int4_group = eo.int4_group;
  so.mtp = eo.scheduler.speculative.method == SpeculativeMethod::Mtp && pos.last();  // mtp_rank_pass.h
  Qwen3Weights w = stage_qwen3_weights(*ck, *stager, so);
  // Hybrids: every rank keeps the state of its own Gated DeltaNet heads for the same slots,
  // snapshots and rollback entries, which rank 0's engine numbers (load_replicas.h), those of
  // each virtual engine under --pp-virtual-engines (`engines` of them).
  set_hybrid_state_pool(w, eo, engines);
  return std::make_shared<const Qwen3Weights>(std::move(w));
}

std::unique_ptr<KvCache> make_cache(const Qwen3Model& model, int64_t num_blocks, int32_t block_size, DType dtype) {
  return std::make_unique<KvCache>(model.kv_cache_spec(num_blocks, block_size, dtype));
}

// The KV block count every rank uses: rank 0's plan (the whole replica's KV against its host's
// memory), lowered to what the most constrained other host can hold for its own ranks' layers
// (`mine`: each rank's bound; ranks on rank 0's host bound nothing tighter than rank 0's plan).
// Each rank in turn broadcasts its number; all take the min. A rank 0 plan of -1 (it failed)
// stops every rank.
int64_t agree_num_blocks(Communicator& comm, int64_t mine) {
  int64_t agreed = 0;
  for (int r = 0; r < comm.size(); ++r) {
    int64_t v = mine;
    comm.broadcast(&v, sizeof v, r);
    if (r == 0 && v <= 0) return v;
    if (r > 0 && v < agreed && comm.rank() == 0)
      log_warn("rank ", r, "'s host holds only ", v, " KV blocks of its layers: every rank uses ", v);
    agreed = r == 0 ? v : std::min(agreed, v);
  }
  return agreed;
}

// What this host could hold of this rank's own layers' KV (90 % of its free memory).
int64_t own_kv_bound(const Qwen3Weights& w, const EngineLoadOptions& eo) {
  int32_t kv_layers = 0;  // a hybrid's Gated DeltaNet layers keep no KV
  for (const Qwen3LayerWeights& l : w.layers) kv_layers += l.mixer != LayerMixer::GatedDeltaNet;
  const int64_t per_block = kv_bytes_per_block(std::max<int32_t>(1, kv_layers), eo.cache.block_size, w.n_kv_heads,
                                               w.config.head_dim, eo.kv_cache_dtype);
  return std::max<int64_t>(1, int64_t(double(available_memory_bytes()) * 0.9) / std::max<int64_t>(1, per_block));
}

// The model of a rank: its stage's layers; collectives over its stage's TP group.
Communicator* model_comm(const StagePosition& pos, Communicator* world, Communicator* stage) {
  if (pos.tp == 1) return nullptr;
  return pos.pp > 1 ? stage : world;
}

}  // namespace

void exchange_load_status(Communicator& comm, const std::string& my_error) {
  std::string failures;
  for (int r = 0; r < comm.size(); ++r) {
    std::string msg;  // rank r's error, sent by rank r, received by the others
    if (comm.rank() == r && !my_error.empty()) msg = str_cat("rank ", r, " on ", this_host_name(), ": ", my_error);
    int64_t len = static_cast<int64_t>(msg.size());
    comm.broadcast(&len, sizeof len, r);
    msg.resize(size_t(len));
    comm.broadcast(msg.data(), len, r);
    if (len > 0) failures += (failures.empty() ? "" : "; ") + msg;
  }
  if (!failures.empty()) {
    mark_ranks_stopping();  // every rank exits now: no rank's exit is a fault
    fail("the tensor-parallel ranks did not all load: ", failures);
  }
}

ProcessTpExecutor::ProcessTpExecutor(std::unique_ptr<Backend> backend, std::shared_ptr<const Qwen3Weights> weights,
                                     std::shared_ptr<Communicator> comm, std::shared_ptr<Communicator> stage_comm,
                                     int pp, MicroBatchPolicy micro, int64_t num_blocks, int32_t block_size, DType kv_dtype)
    : backend_(std::move(backend)),
      weights_(std::move(weights)),
      comm_(std::move(comm)),
      stage_comm_(std::move(stage_comm)) {
  const StagePosition pos = StagePosition::of_rank(0, pp, comm_->size() / pp);
  PYPTO_ASSERT(comm_ && comm_->rank() == 0 && weights_->tp_rank == 0 && weights_->tp_size == pos.tp,
               "rank 0's executor needs slice 0 of the group's size");
  model_ = std::make_unique<Qwen3Model>(*weights_, *backend_, model_comm(pos, comm_.get(), stage_comm_.get()));
  cache_ = make_cache(*model_, num_blocks, block_size, kv_dtype);
  runner_ = std::make_unique<ModelRunner>(*model_, *cache_);
  stage_ = std::make_unique<PipelineStage>(*model_, *cache_, pp > 1 ? comm_.get() : nullptr, pos, micro);
}

ProcessTpExecutor::~ProcessTpExecutor() {
  if (rank_fault()) return;  // the group is broken: nobody is listening
  mark_ranks_stopping();
  StepHeader h{kStop, 0};
  try {
    comm_->broadcast(&h, sizeof h, 0);
  } catch (const std::exception& e) {
    log_warn("stopping the tensor-parallel ranks: ", e.what());
  }
}

void ProcessTpExecutor::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  const ForwardBatch& batch = runner_->build_batch(so);
  last_batch_ = &batch;
  out.vocab_size = model_->vocab_size();
  out.logits.resize(static_cast<size_t>(batch.num_logits() * out.vocab_size));
  if (batch.num_tokens() == 0) return;
  // The other ranks get the very batch rank 0 runs: block tables, slots and logits rows included,
  // so they keep no scheduler state of their own.
  encode_batch(batch, message_);
  StepHeader h{kStep, static_cast<int64_t>(message_.size())};
  comm_->broadcast(&h, sizeof h, 0);
  comm_->broadcast(message_.data(), h.bytes, 0);
  if (!aux_out_) return stage_->run(batch, out.logits.data());
  aux_out_->resize(size_t(batch.num_tokens() * int64_t(aux_layers_.size()) * model_->hidden_size()));
  stage_->capture_aux_hidden(aux_layers_, aux_out_->data());
  try {
    stage_->run(batch, out.logits.data());
  } catch (...) {
    stage_->capture_aux_hidden({}, nullptr);
    throw;
  }
  stage_->capture_aux_hidden({}, nullptr);
}

int run_rank_worker(const ReplicaLoadOptions& opt) {
  PYPTO_ASSERT(opt.process_comm, "a rank worker needs its process group");
  Communicator& world = *opt.process_comm;                                // every rank: start-up
  Communicator& comm = opt.replica_comm ? *opt.replica_comm : world;      // this replica: the steps
  const int rank = world.rank(), pp = opt.layout.pp;
  const StagePosition pos = StagePosition::of_rank(comm.rank(), pp, comm.size() / pp);
  PYPTO_ASSERT(rank > 0, "rank 0 runs the engine, not a worker");
  // A replica's first rank under --dp (not replica 0's: that is rank 0) gets its steps from rank 0
  // over its link and runs them with its replica as rank 0 runs replica 0's (replica_link.h).
  const bool leader = comm.rank() == 0;
  PYPTO_ASSERT(!leader || (opt.link_comms.size() == 1 && opt.link_comms[0]->rank() == 1),
               "rank ", rank, " leads a replica but has no link to rank 0");
  PYPTO_ASSERT(pp == 1 || pos.tp == 1 || (opt.stage_comm && opt.stage_comm->rank() == pos.tp_rank),
               "rank ", rank, " has no communicator for its pipeline stage");
  const EngineLoadOptions& eo = opt.engine;
  Communicator* link = leader ? opt.link_comms[0].get() : nullptr;
  std::unique_ptr<Backend> backend;
  std::shared_ptr<const Qwen3Weights> weights;
  std::string error;
  try {
    backend = rank_backend(opt, rank);
    weights = stage_own_slice(eo, pos, /*engine_rank=*/false, opt.pp_virtual_engines ? pp : 1);
  } catch (const std::exception& e) {
    error = e.what();
  }
  exchange_load_status(world, error);
  const int64_t num_blocks = agree_num_blocks(world, own_kv_bound(*weights, eo));
  if (num_blocks <= 0) fail("rank ", rank, ": rank 0 failed to start (see its message); stopping");

  Qwen3Model model(*weights, *backend, model_comm(pos, &comm, opt.stage_comm.get()));
  auto cache = make_cache(model, num_blocks, eo.cache.block_size, eo.kv_cache_dtype);
  if (eo.prefault_kv_cache) cache->prefault();
  if (opt.pp_virtual_engines) {  // steps of several engines in flight together (step_pipeline.h)
    log_info("rank ", rank, " of ", world.size(), " (pipeline stage ", pos.stage, ": layers ", weights->layer_begin, "-",
             weights->layer_end - 1, ", tensor-parallel rank ", pos.tp_rank, ") on ", this_host_name(), ": ready (",
             num_blocks, " KV blocks, ", pp, " virtual engines)");
    PipelinedMtp mtp;  // the drafter's passes between the engines' steps (mtp_virtual_engines.h)
    if (eo.scheduler.speculative.method == SpeculativeMethod::Mtp)
      mtp = {weights.get(), mtp_kv_blocks(num_blocks / pp, eo) * pp, eo.cache.block_size, eo.kv_cache_dtype};
    return run_pipelined_stage(model, *cache, comm, opt.stage_comm.get(), opt.return_comm.get(), pos, mtp);
  }
  PipelineStage stage(model, *cache, pp > 1 ? &comm : nullptr, pos, opt.pp_micro_batches);
  // --speculative-config method mtp: this rank's share of the drafter's passes (mtp_rank_pass.h).
  std::unique_ptr<MtpRankPart> mtp;
  std::vector<float> mtp_hidden;  // the last stage's TP rank 0 under --pp: each step's hidden rows
  if (eo.scheduler.speculative.method == SpeculativeMethod::Mtp) {
    mtp = std::make_unique<MtpRankPart>(*weights, *backend, comm, model_comm(pos, &comm, opt.stage_comm.get()), pos,
                                        mtp_kv_blocks(num_blocks, eo), eo.cache.block_size, eo.kv_cache_dtype);
    if (mtp->captures_step_hidden()) stage.capture_normed_hidden(&mtp_hidden);
  }
  const int replicas = world.size() / comm.size();
  log_info("rank ", rank, " of ", world.size(),
           replicas > 1 ? str_cat(" (replica ", rank / comm.size(), leader ? ", its first rank" : "", ")") : std::string(),
           pp > 1 ? str_cat(" (pipeline stage ", pos.stage, ": layers ", weights->layer_begin, "-", weights->layer_end - 1,
                            ", tensor-parallel rank ", pos.tp_rank, ")")
                  : std::string(),
           " on ", this_host_name(), ": ready (", num_blocks, " KV blocks)");
  ForwardBatch batch;
  std::vector<uint8_t> message;
  std::vector<float> logits;  // a leader's: the step's logits for rank 0
  std::vector<float> eagle3_e;  // the EAGLE-3 head's lookups: this rank's rows, scratch
  std::vector<int32_t> eagle3_ids;
  for (;;) {
    StepHeader h{};
    if (link) link->recv(&h, sizeof h, 0);  // a leader passes rank 0's step on to its replica
    comm.broadcast(&h, sizeof h, 0);
    if (h.kind == kStop) return 0;
    if (h.kind == kMtpPassMessage && mtp) {  // one of the drafter's passes, between steps
      message.resize(size_t(h.bytes));
      if (link) link->recv(message.data(), h.bytes, 0);  // replica i > 0's, from rank 0 (mtp_rank_pass.h)
      comm.broadcast(message.data(), h.bytes, 0);
      std::string refused;
      try {
        mtp->serve(message);
      } catch (const Error& e) {
        // Every rank refused the pass before its first message (rank 0 reports it); go on.
        refused = e.what();
      }
      if (link) mtp->reply_over_link(*link, refused);
      continue;
    }
    if (h.kind == kEagle3EmbeddingMessage && !link && pp == 1) {  // the EAGLE-3 head's lookup (eagle3_rank_pass.h)
      message.resize(size_t(h.bytes));
      comm.broadcast(message.data(), h.bytes, 0);
      serve_eagle3_embedding(message, *weights, *backend, model_comm(pos, &comm, opt.stage_comm.get()), eagle3_e,
                             eagle3_ids);
      continue;
    }
    PYPTO_ASSERT(h.kind == kStep && h.bytes > 0, "step message kind ", h.kind, " of ", h.bytes, " bytes");
    message.resize(size_t(h.bytes));
    if (link) link->recv(message.data(), h.bytes, 0);
    comm.broadcast(message.data(), h.bytes, 0);
    decode_batch(message.data(), message.size(), batch);
    std::string refused;
    try {
      if (link) logits.resize(size_t(batch.num_logits() * weights->config.vocab_size));
      stage.run(batch, link ? logits.data() : nullptr);  // a non-leader's logits go to its replica's rank 0
    } catch (const Error& e) {
      // A bad batch (a token id outside the vocabulary) throws on every rank before the first
      // collective, as in TpModelRunner: rank 0 fails the step's requests, this rank goes on.
      refused = e.what();
    }
    if (mtp && refused.empty()) mtp->exchange_step_hidden(batch.num_tokens(), mtp_hidden);
    if (!link) continue;
    LinkReply reply{int64_t(refused.size())};
    link->send(&reply, sizeof reply, 0);
    if (!refused.empty())
      link->send(refused.data(), reply.error_bytes, 0);
    else if (!logits.empty())
      link->send(logits.data(), int64_t(sizeof(float) * logits.size()), 0);
    if (mtp && refused.empty() && batch.num_tokens() > 0) {  // the drafter on rank 0 reads the step's rows
      const int64_t floats = batch.num_tokens() * weights->config.hidden_size;
      PYPTO_ASSERT(int64_t(mtp_hidden.size()) >= floats, "rank ", rank, ": captured ", mtp_hidden.size(),
                   " floats of hidden rows for ", batch.num_tokens(), " rows");
      link->send(mtp_hidden.data(), int64_t(sizeof(float)) * floats, 0);
    }
  }
}

namespace {

// --pp-virtual-engines: pp engines over one pipeline (step_pipeline.h), each with 1/pp of the
// agreed KV blocks (block ids [g·B, (g+1)·B) of every stage's cache), routed like replicas.
// draft: the draft model's weights (null: none); each engine gets its own drafter on the pipeline
// thread's pool (draft_load.h make_pipelined_draft_proposer).
LoadedEngine pipelined_rank0(const ReplicaLoadOptions& opt, LoadedEngine out, std::unique_ptr<Backend> backend,
                             std::shared_ptr<const Qwen3Weights> weights, EngineConfig ec,
                             std::shared_ptr<const Qwen3Weights> draft) {
  const EngineLoadOptions& eo = opt.engine;
  const ParallelLayout& L = opt.layout;
  const int64_t total = ec.cache.num_blocks, per_engine = total / L.pp;
  const int64_t per_seq = (eo.scheduler.max_model_len + eo.cache.block_size - 1) / eo.cache.block_size;
  if (per_engine < per_seq) {
    mark_ranks_stopping();
    StepPipeline stop(std::move(backend), weights, opt.process_comm, opt.stage_comm, opt.return_comm, L.pp, 1,
                      eo.cache.block_size, eo.kv_cache_dtype);  // tells the stages to stop
    fail("--pp-virtual-engines: each of the ", L.pp, " engines gets ", per_engine, " of the ", total,
         " KV blocks, fewer than one --max-model-len ", eo.scheduler.max_model_len, " sequence needs (", per_seq,
         "): raise --kv-cache-memory or lower --max-model-len");
  }
  auto pipeline = std::make_shared<StepPipeline>(std::move(backend), weights, opt.process_comm, opt.stage_comm,
                                                 opt.return_comm, L.pp, total, eo.cache.block_size, eo.kv_cache_dtype);
  if (eo.prefault_kv_cache) pipeline->prefault_kv_cache();
  // With MTP each engine has its own drafter and stretch of the last stage's MTP pool, which the
  // stages size from the same agreed block count (mtp_virtual_engines.h).
  const bool mtp = eo.scheduler.speculative.method == SpeculativeMethod::Mtp;
  if (mtp) pipeline->enable_mtp();
  ec.cache.num_blocks = static_cast<int32_t>(per_engine);
  out.capacity.num_blocks = per_engine;
  std::vector<ReplicaSet::Replica> engines;
  for (int g = 0; g < L.pp; ++g) {
    const VirtualEngineShare share = virtual_engine_share(weights->config, eo, g, per_engine);
    EngineConfig eg = ec;
    std::unique_ptr<ModelExecutor> exec =
        mtp ? make_mtp_virtual_engine_executor(pipeline, share, eo.cache.block_size, weights->config, g,
                                               mtp_kv_blocks(per_engine, eo), &eg.drafter)
            : std::make_unique<VirtualEngineExecutor>(pipeline, share, eo.cache.block_size);
    if (draft) eg.drafter = make_pipelined_draft_proposer(draft, pipeline, eo, per_engine);
    add_engine(out, engines, eg, std::move(exec));
  }
  out.placement = str_cat("process group of ", L.ranks_per_replica(), " ranks (", L.pp, " pipeline stages of ", L.tp,
                          "): rank 0 on ", this_host_name(), " (", L.pp, " virtual engines of ", per_engine,
                          " KV blocks each, their steps in flight together",
                          mtp ? str_cat("; each engine's MTP drafter's passes on the ", L.tp, " rank",
                                        L.tp > 1 ? "s" : "", " of the last stage")
                          : draft ? std::string("; each engine's draft model on stage 0's rank 0, between the steps")
                              : std::string(),
                          ")");
  out.replicas = std::make_shared<ReplicaSet>(std::move(engines), router_options(opt, per_engine));
  return out;
}

}  // namespace

LoadedEngine load_process_rank0(const ReplicaLoadOptions& opt) {
  const EngineLoadOptions& eo = opt.engine;
  const ParallelLayout& L = opt.layout;
  Communicator& comm = *opt.process_comm;  // every rank of every replica: the start-up exchanges
  std::shared_ptr<Communicator> replica_comm = opt.replica_comm ? opt.replica_comm : opt.process_comm;
  PYPTO_ASSERT(comm.rank() == 0 && comm.size() == L.ranks_per_replica() * L.dp &&
                   replica_comm->size() == L.ranks_per_replica() && int(opt.link_comms.size()) == L.dp - 1,
               "process group of ", comm.size(), " for --dp ", L.dp, " x --pp ", L.pp, " x --tp ", L.tp);
  const StagePosition pos = StagePosition::of_rank(0, L.pp, L.tp);
  const bool mtp = eo.scheduler.speculative.method == SpeculativeMethod::Mtp;  // mtp_rank_pass.h
  eo.scheduler.validate();
  const auto t0 = std::chrono::steady_clock::now();
  LoadedEngine out;
  out.tp = L.tp;
  out.dp = L.dp;
  out.pp = L.pp;
  std::unique_ptr<Backend> backend;
  std::shared_ptr<const Qwen3Weights> weights;
  std::shared_ptr<const Qwen3Weights> draft;  // --speculative-config draft model: unsharded, on rank 0
  std::shared_ptr<const Eagle3Weights> eagle3_head;  // --speculative-config eagle3: on rank 0 (eagle3_rank_pass.h)
  std::string error;
  try {
    if (!kv_dtype_supported(eo.kv_cache_dtype))
      fail("--kv-cache-dtype must be one of ", kKvCacheDtypeHelp, ", got ", dtype_name(eo.kv_cache_dtype));
    backend = rank_backend(opt, 0);
    weights = stage_own_slice(eo, pos, /*engine_rank=*/true, opt.pp_virtual_engines ? L.pp : 1);
    check_speculative_target(eo.scheduler.speculative, weights->config, eo.model_dir);  // draft vocab / tokenizer
    if (eo.scheduler.speculative.method == SpeculativeMethod::DraftModel) {
      auto stager = make_cpu_backend(cpu_count(), {}, eo.matmul_precision, eo.cpu_linear_kernel);
      draft = stage_draft_weights(eo.scheduler.speculative, eo, *stager);
    }
    if (eo.scheduler.speculative.method == SpeculativeMethod::Eagle3) {
      auto stager = make_cpu_backend(cpu_count(), {}, eo.matmul_precision, eo.cpu_linear_kernel);
      eagle3_head = load_eagle3_weights(read_eagle3_config(eo.scheduler.speculative.draft_model), weights->config, *stager);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  exchange_load_status(comm, error);  // throws here and on every rank when one failed
  out.backend_name = backend->name();
  log_info("CPU matrix kernels: ", describe_cpu_linear_choice(), "; running ", out.backend_name);
  out.threads = rank_threads(opt, 0);
  out.config = weights->config;
  out.weight_bytes = weights->resident_bytes * size_t(L.ranks_per_replica());  // about: stages differ a little
  if (draft) out.weight_bytes += draft->resident_bytes;
  if (eagle3_head) out.weight_bytes += eagle3_head->bytes;
  out.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ModelConfig& cfg = weights->config;

  // KV: a block id covers the same token slots on every rank, each holding its own KV heads; the
  // pool is planned from rank 0's free memory (on one host that is every rank's; across hosts each
  // host holds 1/tp of it, so this is conservative when the hosts are alike), split evenly over the
  // --dp replicas as with threads; every replica uses the agreed block count.
  int64_t num_blocks = -1;
  try {
    // A hybrid keeps K/V for its full-attention layers only, and its Gated DeltaNet states (every
    // rank its heads' share: one replica's worth in all) come out of the memory first.
    const int32_t kv_layers = cfg.hybrid() ? std::max<int32_t>(1, cfg.num_full_attention_layers()) : cfg.num_hidden_layers;
    const int64_t block_bytes = kv_bytes_per_block(kv_layers, eo.cache.block_size, weights->n_kv_heads,
                                                   cfg.head_dim, eo.kv_cache_dtype) * L.tp +
                                (draft ? draft_kv_bytes_per_block(*draft, eo) : 0) +  // the draft's block beside each
                                (mtp ? kv_bytes_per_block(1, eo.cache.block_size, weights->n_kv_heads, cfg.head_dim,
                                                          eo.kv_cache_dtype) * L.tp
                                     : 0) +  // the MTP layer's, on the last stage's TP ranks
                                (eagle3_head ? eagle3_kv_bytes_per_block(*eagle3_head, eo) : 0);  // the head's, rank 0's
    const int32_t engines = opt.pp_virtual_engines ? L.pp : 1;
    const int64_t state_bytes = hybrid_state_bytes(cfg, eo, engines) * L.dp;
    out.capacity = plan_kv_capacity(kv_capacity_request(
        eo, block_bytes, (static_cast<int64_t>(available_memory_bytes()) - state_bytes) / L.dp, engines));
    num_blocks = out.capacity.num_blocks;
  } catch (...) {
    mark_ranks_stopping();
    agree_num_blocks(comm, -1);  // the workers stop too
    throw;
  }
  const int64_t planned = num_blocks;
  num_blocks = agree_num_blocks(comm, num_blocks);
  if (num_blocks != planned) {
    out.capacity.num_blocks = num_blocks;
    const int64_t per_seq = (eo.scheduler.max_model_len + eo.cache.block_size - 1) / eo.cache.block_size;
    if (num_blocks < per_seq) {
      mark_ranks_stopping();
      fail("a pipeline rank's host holds only ", num_blocks, " KV blocks of its layers, fewer than one --max-model-len ",
           eo.scheduler.max_model_len, " sequence needs (", per_seq, "): free memory or lower --max-model-len");
    }
  }

  EngineConfig ec;
  ec.scheduler = eo.scheduler;
  ec.cache = eo.cache;
  ec.cache.num_blocks = static_cast<int32_t>(num_blocks);
  ec.vocab_size = cfg.vocab_size;
  ec.eos_token_ids = cfg.eos_token_ids;
  if (cfg.hybrid()) {  // as load_replicas: a prefix-cache hit resumes only at a state snapshot
    ec.cache.recurrent_state = true;
    ec.cache.state_snapshots = hybrid_state_snapshots(cfg, eo);
  }
  if (opt.pp_virtual_engines) return pipelined_rank0(opt, std::move(out), std::move(backend), weights, ec, draft);
  // The draft runs on rank 0's backend (the engine thread's pool) between the target's steps;
  // replica i > 0's (below) on a pool of its own.
  if (draft) ec.drafter = make_draft_proposer(draft, *backend, eo, num_blocks);
  Backend& rank0_backend = *backend;
  auto runner = std::make_unique<ProcessTpExecutor>(std::move(backend), weights, replica_comm, opt.stage_comm, L.pp,
                                                    opt.pp_micro_batches, num_blocks, eo.cache.block_size,
                                                    eo.kv_cache_dtype);
  if (eo.prefault_kv_cache) runner->prefault_kv_cache();
  std::unique_ptr<ModelExecutor> replica0;
  if (eagle3_head) {  // the aux rows captured here, the head on this rank (eagle3_rank_pass.h)
    replica0 = make_eagle3_process_executor(std::move(runner), eagle3_head, mtp_kv_blocks(num_blocks, eo),
                                            eo.cache.block_size, eo.kv_cache_dtype, &ec.drafter);
  } else if (!mtp) {
    replica0 = std::move(runner);
  } else {  // the drafter's bookkeeping here, its passes on the last stage's ranks (mtp_rank_pass.h)
    const int64_t mtp_blocks = mtp_kv_blocks(num_blocks, eo);
    auto part = std::make_shared<MtpRankPart>(*weights, rank0_backend, *replica_comm,
                                              model_comm(pos, replica_comm.get(), opt.stage_comm.get()), pos,
                                              mtp_blocks, eo.cache.block_size, eo.kv_cache_dtype);
    replica0 = make_mtp_process_executor(std::move(runner), std::move(part), cfg, L.pp, mtp_blocks, eo.cache.block_size,
                                         &ec.drafter);
  }
  // Replica 0 runs on rank 0's own ranks; replica i > 0 over its link to its first rank.
  std::vector<ReplicaSet::Replica> replicas;
  for (int i = 0; i < L.dp; ++i) {
    std::unique_ptr<ModelExecutor> inner;
    EngineConfig ei = ec;  // with MTP each replica has its own drafter
    if (i == 0) {
      inner = std::move(replica0);
    } else {
      const std::shared_ptr<Communicator>& link = opt.link_comms[size_t(i - 1)];
      auto remote = std::make_unique<RemoteReplicaExecutor>(link, cfg.vocab_size, eo.cache.block_size,
                                                            weights->config.hybrid() ? weights->state_slots : 0);
      if (mtp)  // its drafter's bookkeeping here too, its passes over the link (mtp_rank_pass.h)
        inner = make_mtp_link_executor(std::move(remote), link, cfg, mtp_kv_blocks(num_blocks, eo),
                                       eo.cache.block_size, &ei.drafter);
      else
        inner = std::move(remote);
      // A draft model runs in this process on the engine's thread, as replica 0's does, with its
      // own KV pool over the shared weights, on a pool of its own: the cores of the replica's
      // first rank (mp on one host: they idle while the engine drafts, as replica 0's ranks do),
      // or this host's under mpi.
      if (draft) ei.drafter = make_draft_proposer(draft, rank_backend(opt, i * L.ranks_per_replica()), eo, num_blocks);
    }
    add_engine(out, replicas, ei, std::move(inner));
  }
  const int nr = L.ranks_per_replica();
  const std::string shape = L.pp > 1 ? str_cat(" (", L.pp, " pipeline stages of ", L.tp, ")") : std::string();
  if (L.dp == 1)
    out.placement = str_cat("process group of ", nr, " ranks", shape, ": rank 0 on ", this_host_name(), " (engine)",
                            mtp ? str_cat("; the MTP drafter's passes on the ", L.tp, " rank", L.tp > 1 ? "s" : "",
                                          " of the last stage")
                                : std::string());
  else
    out.placement = str_cat("process group of ", L.dp, " replicas of ", nr, " ranks", shape, ": replica i is ranks i*", nr,
                            " .. i*", nr, "+", nr - 1, "; rank 0 on ", this_host_name(),
                            " (every replica's engine, the router)",
                            mtp ? str_cat("; each replica's MTP drafter's passes on the ", L.tp, " rank",
                                          L.tp > 1 ? "s" : "", " of its last stage")
                            : draft ? str_cat("; each replica's draft model in rank 0's process, on ",
                                              L.pinned ? "the cores of the replica's first rank" : "this host's cores")
                                : std::string());
  out.replicas = std::make_shared<ReplicaSet>(std::move(replicas), router_options(opt, num_blocks));
  return out;
}

}  // namespace pypto
