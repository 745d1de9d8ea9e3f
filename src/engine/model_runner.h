#pragma once
// ModelRunner: the real ModelExecutor. It keeps each running request's block table, turns a
// SchedulerOutput into one ForwardBatch (prefill chunks and decodes together), runs the Qwen3
// forward pass over the paged KV cache and returns logits for the rows that sample.
//
// Start-up (checkpoint → staged weights → model → KV cache sized from the memory budget → Engine on
// its EngineLoop thread) is load_replicas() (parallel/replicas/load_replicas.h), which sits above
// the engine library; load_engine() there is its one-rank, one-replica form. EngineLoadOptions and
// LoadedEngine are declared here because the engine-level callers pass them around.
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_tables.h"
#include "engine/engine_config.h"
#include "engine/engine_loop.h"
#include "engine/kv_capacity.h"
#include "engine/model_executor.h"
#include "io/model_config.h"
#include "kernels/backend.h"
#include "model/forward_batch.h"
#include "model/gdn_prefill.h"
#include "model/kv_cache.h"
#include "model/qwen3_model.h"
#include "model/qwen3_weights.h"

namespace pypto {

class ModelRunner : public ModelExecutor {
 public:
  // `model` and `cache` must outlive the runner.
  ModelRunner(Qwen3Model& model, KvCache& cache);
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override;
  // On the model's backend threads (the pool the kernels use).
  void parallel_rows(int64_t n, const std::function<void(int64_t)>& fn) override {
    model_.backend().parallel_rows(n, fn);
  }
  // The first half of execute(): applies `so` to the block tables and fills the step's
  // ForwardBatch (valid until the next call). A tensor-parallel executor builds the batch once
  // here and runs it on every rank (parallel/replicas/tp_model_runner.h).
  const ForwardBatch& build_batch(const SchedulerOutput& so);

 private:
  Qwen3Model& model_;
  KvCache& cache_;
  BlockTables block_tables_;  // req id → physical blocks
  ForwardBatch batch_;        // reused every step
};

struct EngineLoadOptions {
  std::string model_dir;
  std::string hf_overrides;  // --hf-overrides JSON object applied over config.json ("" for none)
  Runner runner = Runner::Auto;  // --runner (io/pooling_config.h): generate or pooling (embed / score)
  SchedulerConfig scheduler;
  CacheConfig cache;                      // block_size, prefix caching (num_blocks is planned here)
  std::optional<int64_t> kv_cache_memory;  // --kv-cache-memory bytes; else memory_utilization
  std::optional<double> memory_utilization;  // neither: the CPU default (engine/kv_capacity.h)
  DType kv_cache_dtype = DType::BF16;
  std::optional<DType> weight_dtype;      // --dtype other than auto: must be the checkpoint's
  int threads = 0;                        // 0: every core this process may use
  MatmulPrecision matmul_precision = kDefaultMatmulPrecision;  // --matmul-precision
  CpuLinearKernel cpu_linear_kernel = CpuLinearKernel::Auto;    // --cpu-linear-kernel
  std::vector<int> cores;                 // pin threads to these cores (empty: no pinning)
  bool show_progress = true;
  std::string compile_cache_dir;          // --use-compile-cache: where staged slabs are cached
  WeightFormat quantization = WeightFormat::Float;  // --quantization int8 | int4 (none: Float)
  int32_t int4_group = 64;                // --quantization-group: inputs per int4 scale
  bool expert_parallel = false;           // --enable-expert-parallel: whole experts per TP rank
  bool prefault_kv_cache = false;         // map every KV page at load (KvCache::prefault)
  GdnPrefill gdn_prefill = GdnPrefill::Recurrent;  // --gdn-prefill (hybrids, model/gdn_prefill.h)
  // Benchmarks comparing engine settings over one copy of a large model: the staged slices
  // (LoadedEngine::weights) of an earlier load of the same checkpoint with the same staging
  // options (quantization, precision, layout, the MTP head if asked for), used instead of staging.
  std::vector<std::shared_ptr<const Qwen3Weights>> reuse_weights;
};

class ReplicaSet;  // parallel/replicas/replica_set.h: the data-parallel router

struct LoadedEngine {
  std::unique_ptr<EngineLoop> loop;  // the engine (replica 0 under data parallelism)
  ModelConfig config;
  KvCapacity capacity;      // of one replica
  size_t weight_bytes = 0;  // staged bytes, all TP ranks (shared by the replicas)
  double load_seconds = 0;  // checkpoint open + staging
  std::string backend_name;
  int threads = 0;          // compute threads per rank

  // Set by load_replicas() (parallel/replicas/load_replicas.h), the one start-up path (load_engine
  // included). With dp > 1 requests must go through `replicas` (it routes over loop and
  // more_loops); with dp == 1 `loop` is the whole engine, TP ranks included.
  int tp = 1, dp = 1, pp = 1;
  std::vector<std::unique_ptr<EngineLoop>> more_loops;  // replicas 1 .. dp-1
  std::shared_ptr<ReplicaSet> replicas;                 // routes over every replica (declared after the loops it uses)
  std::string placement;                                // which devices/cores each rank runs on, for the log
  std::vector<std::shared_ptr<const Qwen3Weights>> weights;  // the staged slice of each rank of a replica
};

}  // namespace pypto
