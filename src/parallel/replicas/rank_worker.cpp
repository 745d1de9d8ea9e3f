#include "parallel/replicas/rank_worker.h"

#include <chrono>
#include <cstring>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "engine/engine.h"
#include "io/checkpoint.h"
#include "model/weight_staging.h"
#include "parallel/mpi_communicator.h"
#include "parallel/rank_health.h"
#include "parallel/replicas/batch_codec.h"
#include "parallel/replicas/load_replicas.h"

namespace pypto {
namespace {

// What rank 0 broadcasts before each step.
struct StepHeader {
  int64_t kind;   // kStep or kStop
  int64_t bytes;  // the encoded batch that follows (kStep)
};
constexpr int64_t kStep = 1, kStop = 2;

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

// Opens this host's copy of the checkpoint, checks that this rank's slice fits this host's free
// memory and stages it. Errors say which file or how many bytes.
std::shared_ptr<const Qwen3Weights> stage_own_slice(const EngineLoadOptions& eo, int rank, int tp) {
  auto ck = Checkpoint::open(eo.model_dir);
  validate_qwen3_checkpoint(*ck);
  const ModelConfig& cfg = ck->config();
  if (eo.scheduler.max_model_len > cfg.max_position_embeddings)
    fail("--max-model-len ", eo.scheduler.max_model_len, " exceeds the model's max_position_embeddings (",
         cfg.max_position_embeddings, ")");
  if (cfg.num_key_value_heads % tp != 0)
    fail("--tp ", tp, " does not divide num_key_value_heads (", cfg.num_key_value_heads,
         "): each rank holds an equal share of the KV heads; use a --tp that divides it");
  if (eo.weight_dtype && ck->get("model.embed_tokens.weight").info->dtype != *eo.weight_dtype)
    fail("--dtype asks for ", dtype_name(*eo.weight_dtype), " weights but the checkpoint's are ",
         dtype_name(ck->get("model.embed_tokens.weight").info->dtype), ": leave out --dtype or pass --dtype auto");
  auto stager = make_cpu_backend(cpu_count(), {}, eo.matmul_precision, eo.cpu_linear_kernel);
  const StagedFormats formats = staged_formats(*ck, eo.quantization, eo.int4_group);  // --quantization
  if (rank == 0 && formats.layers != WeightFormat::Float) log_info("weights: ", formats.describe());
  const size_t need = staged_slab_bytes(*ck, *stager, rank, tp, -1, &formats), have = available_memory_bytes();
  if (need > have) {
    char n[32], a[32];
    fail(ck->dir(), ": this rank's weight slice needs ", format_bytes(need, n, sizeof n), " but this host has ",
         format_bytes(have, a, sizeof a), " available (MemAvailable)");
  }
  StagingOptions so;
  so.tp_rank = rank;
  so.tp_size = tp;
  so.show_progress = eo.show_progress && rank == 0;
  so.compile_cache_dir = eo.compile_cache_dir;
  so.quantization = eo.quantization;
  so.int4_group = eo.int4_group;
  return std::make_shared<const Qwen3Weights>(stage_qwen3_weights(*ck, *stager, so));
}

std::unique_ptr<KvCache> make_cache(const Qwen3Model& model, int64_t num_blocks, int32_t block_size, DType dtype) {
  return std::make_unique<KvCache>(model.kv_cache_spec(num_blocks, block_size, dtype));
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
                                     std::shared_ptr<Communicator> comm, int64_t num_blocks, int32_t block_size,
                                     DType kv_dtype)
    : backend_(std::move(backend)), weights_(std::move(weights)), comm_(std::move(comm)) {
  PYPTO_ASSERT(comm_ && comm_->rank() == 0 && weights_->tp_rank == 0 && weights_->tp_size == comm_->size(),
               "rank 0's executor needs slice 0 of the group's size");
  model_ = std::make_unique<Qwen3Model>(*weights_, *backend_, comm_->size() > 1 ? comm_.get() : nullptr);
  cache_ = make_cache(*model_, num_blocks, block_size, kv_dtype);
  runner_ = std::make_unique<ModelRunner>(*model_, *cache_);
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
  out.vocab_size = model_->vocab_size();
  out.logits.resize(static_cast<size_t>(batch.num_logits() * out.vocab_size));
  if (batch.num_tokens() == 0) return;
  // The other ranks get the very batch rank 0 runs: block tables, slots and logits rows included,
  // so they keep no scheduler state of their own.
  encode_batch(batch, message_);
  StepHeader h{kStep, static_cast<int64_t>(message_.size())};
  comm_->broadcast(&h, sizeof h, 0);
  comm_->broadcast(message_.data(), h.bytes, 0);
  model_->forward(batch, *cache_, out.logits.data());
}

int run_rank_worker(const ReplicaLoadOptions& opt, Communicator& comm) {
  const int rank = comm.rank(), tp = comm.size();
  PYPTO_ASSERT(rank > 0, "rank 0 runs the engine, not a worker");
  const EngineLoadOptions& eo = opt.engine;
  std::unique_ptr<Backend> backend;
  std::shared_ptr<const Qwen3Weights> weights;
  std::string error;
  try {
    backend = rank_backend(opt, rank);
    weights = stage_own_slice(eo, rank, tp);
  } catch (const std::exception& e) {
    error = e.what();
  }
  exchange_load_status(comm, error);
  int64_t num_blocks = 0;
  comm.broadcast(&num_blocks, sizeof num_blocks, 0);
  if (num_blocks <= 0) fail("rank ", rank, ": rank 0 failed to start (see its message); stopping");

  Qwen3Model model(*weights, *backend, &comm);
  auto cache = make_cache(model, num_blocks, eo.cache.block_size, eo.kv_cache_dtype);
  if (eo.prefault_kv_cache) cache->prefault();
  log_info("rank ", rank, " of ", tp, " on ", this_host_name(), ": ready (", num_blocks, " KV blocks)");
  ForwardBatch batch;
  std::vector<uint8_t> message;
  for (;;) {
    StepHeader h{};
    comm.broadcast(&h, sizeof h, 0);
    if (h.kind == kStop) return 0;
    PYPTO_ASSERT(h.kind == kStep && h.bytes > 0, "step message kind ", h.kind, " of ", h.bytes, " bytes");
    message.resize(size_t(h.bytes));
    comm.broadcast(message.data(), h.bytes, 0);
    decode_batch(message.data(), message.size(), batch);
    try {
      model.forward(batch, *cache, nullptr);  // its logits columns go to rank 0
    } catch (const Error&) {
      // A bad batch (a token id outside the vocabulary) throws on every rank before the first
      // collective, as in TpModelRunner: rank 0 fails the step's requests, this rank goes on.
    }
  }
}

LoadedEngine load_process_rank0(const ReplicaLoadOptions& opt) {
  const EngineLoadOptions& eo = opt.engine;
  const ParallelLayout& L = opt.layout;
  Communicator& comm = *opt.process_comm;
  if (L.dp != 1) fail("--dp ", L.dp, " with ranks as processes: only one replica per process group (use --dp 1)");
  PYPTO_ASSERT(comm.rank() == 0 && comm.size() == L.tp, "process group of ", comm.size(), " for --tp ", L.tp);
  eo.scheduler.validate();
  const auto t0 = std::chrono::steady_clock::now();
  LoadedEngine out;
  out.tp = L.tp;
  out.dp = 1;
  std::unique_ptr<Backend> backend;
  std::shared_ptr<const Qwen3Weights> weights;
  std::string error;
  try {
    if (eo.kv_cache_dtype != DType::BF16 && eo.kv_cache_dtype != DType::F32) fail("--kv-cache-dtype must be bf16 or fp32");
    backend = rank_backend(opt, 0);
    weights = stage_own_slice(eo, 0, L.tp);
  } catch (const std::exception& e) {
    error = e.what();
  }
  exchange_load_status(comm, error);  // throws here and on every rank when one failed
  out.backend_name = backend->name();
  log_info("CPU matrix kernels: ", describe_cpu_linear_choice(), "; running ", out.backend_name);
  out.threads = rank_threads(opt, 0);
  out.config = weights->config;
  out.weight_bytes = weights->resident_bytes * size_t(L.tp);  // every slice is the same size
  out.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const ModelConfig& cfg = weights->config;

  // KV: a block id covers the same token slots on every rank, each holding its own KV heads; the
  // pool is planned from rank 0's free memory (on one host that is every rank's; across hosts each
  // host holds 1/tp of it, so this is conservative when the hosts are alike).
  int64_t num_blocks = -1;
  try {
    const int64_t block_bytes = kv_bytes_per_block(cfg.num_hidden_layers, eo.cache.block_size, weights->n_kv_heads,
                                                   cfg.head_dim, eo.kv_cache_dtype) * L.tp;
    out.capacity = plan_kv_capacity(kv_capacity_request(eo, block_bytes, static_cast<int64_t>(available_memory_bytes())));
    num_blocks = out.capacity.num_blocks;
  } catch (...) {
    mark_ranks_stopping();
    comm.broadcast(&num_blocks, sizeof num_blocks, 0);  // -1: the workers stop too
    throw;
  }
  comm.broadcast(&num_blocks, sizeof num_blocks, 0);

  EngineConfig ec;
  ec.scheduler = eo.scheduler;
  ec.cache = eo.cache;
  ec.cache.num_blocks = static_cast<int32_t>(num_blocks);
  ec.vocab_size = cfg.vocab_size;
  ec.eos_token_ids = cfg.eos_token_ids;
  auto runner = std::make_unique<ProcessTpExecutor>(std::move(backend), weights, opt.process_comm, num_blocks,
                                                    eo.cache.block_size, eo.kv_cache_dtype);
  if (eo.prefault_kv_cache) runner->prefault_kv_cache();
  ReplicaSet::Replica r;
  r.load = std::make_shared<LoadBook>();
  auto executor = std::make_unique<LoadReportingExecutor>(std::move(runner), r.load);
  out.loop = std::make_unique<EngineLoop>(std::make_unique<Engine>(ec, std::move(executor)));
  r.loop = out.loop.get();
  out.placement = str_cat("process group of ", L.tp, " ranks: rank 0 on ", this_host_name(), " (engine)");
  RouterOptions ro;
  ro.block_size = eo.cache.block_size;
  ro.prefix_index_blocks = static_cast<size_t>(std::max<int64_t>(1, num_blocks));
  ro.max_model_len = eo.scheduler.max_model_len;
  std::vector<ReplicaSet::Replica> replicas{r};
  out.replicas = std::make_shared<ReplicaSet>(std::move(replicas), ro);
  return out;
}

}  // namespace pypto
