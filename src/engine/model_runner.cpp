#include "engine/model_runner.h"

#include <algorithm>
#include <chrono>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "engine/engine.h"
#include "io/checkpoint.h"
#include "model/weight_staging.h"

namespace pypto {

ModelRunner::ModelRunner(Qwen3Model& model, KvCache& cache) : model_(model), cache_(cache) {}

void ModelRunner::execute(const SchedulerOutput& so, ExecutorOutput& out) {
  build_batch(so);
  out.vocab_size = model_.vocab_size();
  out.logits.resize(static_cast<size_t>(batch_.num_logits() * out.vocab_size));
  if (batch_.num_tokens() == 0) return;
  model_.forward(batch_, cache_, out.logits.data());
}

const ForwardBatch& ModelRunner::build_batch(const SchedulerOutput& so) {
  for (const std::string& id : so.finished_req_ids) block_tables_.erase(id);
  for (const std::string& id : so.preempted_req_ids) block_tables_.erase(id);

  // Block tables first (new/resumed requests replace theirs, running ones append), so the
  // batch's table width is known before sequences are added.
  int32_t max_blocks = 0;
  for (const ScheduledRequest& s : so.scheduled) {
    std::vector<int32_t>& table = block_tables_[s.req_id];
    if (s.is_new) table.clear();
    table.insert(table.end(), s.block_ids.begin(), s.block_ids.end());
    max_blocks = std::max(max_blocks, static_cast<int32_t>(table.size()));
  }
  batch_.clear();
  batch_.max_blocks_per_seq = max_blocks;
  const int32_t bs = cache_.block_size();
  for (const ScheduledRequest& s : so.scheduled) {
    const std::vector<int32_t>& table = block_tables_.at(s.req_id);
    PYPTO_ASSERT(static_cast<int64_t>(s.token_ids.size()) == s.num_scheduled_tokens);
    PYPTO_ASSERT(static_cast<int64_t>(table.size()) * bs >= s.num_computed_tokens + s.num_scheduled_tokens,
                 "request ", s.req_id, " has too few blocks");
    batch_.add_sequence(s.token_ids.data(), static_cast<int32_t>(s.num_scheduled_tokens),
                        static_cast<int32_t>(s.num_computed_tokens), table.data(), static_cast<int32_t>(table.size()),
                        bs, s.samples ? ForwardBatch::Logits::Last : ForwardBatch::Logits::None);
  }
  return batch_;
}

namespace {

// Everything the engine thread's executor needs, owned together (declaration order = lifetime).
class OwningModelRunner : public ModelExecutor {
 public:
  OwningModelRunner(std::unique_ptr<Backend> backend, std::unique_ptr<Qwen3Weights> weights, const KvCacheSpec& spec,
                    bool prefault)
      : backend_(std::move(backend)), weights_(std::move(weights)), model_(*weights_, *backend_), cache_(spec),
        runner_(model_, cache_) {
    if (prefault) cache_.prefault();
  }
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override { runner_.execute(so, out); }

 private:
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Qwen3Weights> weights_;
  Qwen3Model model_;
  KvCache cache_;
  ModelRunner runner_;
};

}  // namespace

LoadedEngine load_engine(const EngineLoadOptions& opt) {
  opt.scheduler.validate();
  if (opt.kv_cache_dtype != DType::BF16 && opt.kv_cache_dtype != DType::F32)
    fail("--kv-cache-dtype must be bf16 or fp32");
  if (opt.threads < 0) fail("--threads must be positive, got ", opt.threads);
  const auto t0 = std::chrono::steady_clock::now();
  LoadedEngine le;
  le.threads = opt.threads > 0 ? opt.threads : (opt.cores.empty() ? cpu_count() : static_cast<int>(opt.cores.size()));

  auto ck = Checkpoint::open(opt.model_dir);
  const ModelConfig cfg = ck->config();  // a copy: the checkpoint is released after staging
  if (opt.scheduler.max_model_len > cfg.max_position_embeddings)
    fail("--max-model-len ", opt.scheduler.max_model_len, " exceeds the model's max_position_embeddings (",
         cfg.max_position_embeddings, ")");
  auto backend = make_cpu_backend(le.threads, opt.cores, opt.matmul_precision, opt.cpu_linear_kernel);
  le.backend_name = backend->name();
  StagingOptions so;
  so.show_progress = opt.show_progress;
  so.compile_cache_dir = opt.compile_cache_dir;
  auto weights = std::make_unique<Qwen3Weights>(stage_qwen3_weights(*ck, *backend, so));
  ck.reset();  // unmap the checkpoint: everything lives in the staged slab now
  le.config = weights->config;
  le.weight_bytes = weights->resident_bytes;
  le.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // KV blocks: bytes per block from this rank's KV heads.
  KvCacheSpec spec;
  spec.num_layers = cfg.num_hidden_layers;
  spec.block_size = opt.cache.block_size;
  spec.n_kv_heads = weights->n_kv_heads;
  spec.head_dim = cfg.head_dim;
  spec.dtype = opt.kv_cache_dtype;
  KvCapacityRequest kr;
  kr.bytes_per_block = static_cast<int64_t>(spec.bytes_per_block());
  kr.block_size = spec.block_size;
  kr.max_model_len = opt.scheduler.max_model_len;
  kr.kv_cache_memory = opt.kv_cache_memory;
  kr.memory_utilization = opt.memory_utilization;
  kr.available_bytes = static_cast<int64_t>(available_memory_bytes());
  le.capacity = plan_kv_capacity(kr);
  spec.num_blocks = le.capacity.num_blocks;

  EngineConfig ec;
  ec.scheduler = opt.scheduler;
  ec.cache = opt.cache;
  ec.cache.num_blocks = static_cast<int32_t>(spec.num_blocks);
  ec.vocab_size = cfg.vocab_size;
  ec.eos_token_ids = cfg.eos_token_ids;
  auto executor = std::make_unique<OwningModelRunner>(std::move(backend), std::move(weights), spec,
                                                      opt.prefault_kv_cache);
  le.loop = std::make_unique<EngineLoop>(std::make_unique<Engine>(ec, std::move(executor)));
  return le;
}

}  // namespace pypto
