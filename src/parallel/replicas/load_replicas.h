#pragma once
// Start-up for tensor- and data-parallel serving: checkpoint → one staged weight slice per TP
// rank index (shared read-only by every replica) → per replica: a backend per rank pinned to its
// core group, its KV cache share, a TpModelRunner, an Engine on its EngineLoop → a ReplicaSet
// routing over them. dp = tp = 1 is the plain single engine.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "engine/kv_capacity.h"
#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "engine/model_runner.h"
#include "io/model_config.h"
#include "model/weight_staging.h"
#include "parallel/communicator.h"
#include "parallel/device_groups.h"
#include "parallel/replicas/pipeline_stage.h"
#include "parallel/replicas/replica_set.h"
#include "parallel/router.h"

namespace pypto {

struct VirtualEngineShare;  // parallel/replicas/step_pipeline.h

struct ReplicaLoadOptions {
  // Per replica: scheduler limits, block size / prefix caching, KV dtype. kv_cache_memory is the
  // budget of one replica (all its ranks); without it memory_utilization of the memory free
  // after staging is split evenly over the replicas. threads: compute threads per rank (0: every
  // core of its group). engine.cores is ignored: the layout places the ranks.
  EngineLoadOptions engine;
  ParallelLayout layout;
  RoutingPolicy routing = RoutingPolicy::LeastPendingTokens;
  int64_t affinity_slack_tokens = kDefaultAffinitySlackTokens;
  // Set on every rank when the ranks are processes (--distributed-executor-backend mp|mpi): the
  // communicator of every rank of every replica (dp × pp × tp; start-up: load status, KV block
  // count). Rank 0 stages only its own slice and drives the others (parallel/replicas/rank_worker.h).
  // Null: ranks are threads.
  std::shared_ptr<Communicator> process_comm;
  // Ranks as processes: this rank's replica's pp × tp ranks (each step's batch, the pipeline's
  // point-to-point messages); null means process_comm (dp == 1).
  std::shared_ptr<Communicator> replica_comm;
  // With layout.pp > 1 (ranks as processes): the communicator of this rank's pipeline stage's TP
  // group; null when tp == 1.
  std::shared_ptr<Communicator> stage_comm;
  // Ranks as processes with dp > 1: on rank 0, one two-rank link per replica 1 .. dp-1 (rank 0 is
  // rank 0 of each, the replica's first rank is rank 1): rank 0 runs every replica's engine and
  // sends replica i's step batches to its first rank, which runs them with its replica's ranks and
  // sends the logits back. On a replica's first rank: its one link. Empty elsewhere.
  std::vector<std::shared_ptr<Communicator>> link_comms;
  // --pp-virtual-engines (ranks as processes, dp 1, pp > 1): pp engines share the stages, their
  // steps in flight together (parallel/replicas/step_pipeline.h); return_comm is then the link
  // from the last stage's TP rank 0 (rank 1 of it) to rank 0, set on those two ranks.
  bool pp_virtual_engines = false;
  std::shared_ptr<Communicator> return_comm;
  // --pp-micro-batches: how many parts each step's batch is split into on its way through the
  // pipeline stages (parallel/replicas/pipeline_stage.h).
  MicroBatchPolicy pp_micro_batches;
};

// The router over the replicas' (or virtual engines') loops: opt's routing policy and affinity
// slack, the engines' block size and max_model_len, a prefix index of `blocks_per_engine` blocks.
RouterOptions router_options(const ReplicaLoadOptions& opt, int64_t blocks_per_engine);

// Adds one engine over `executor` (its load reported to the router): out.loop if that is still
// empty, else the next of out.more_loops; its router entry is appended to `engines`.
void add_engine(LoadedEngine& out, std::vector<ReplicaSet::Replica>& engines, const EngineConfig& ec,
                std::unique_ptr<ModelExecutor> executor);

// The engine (LoadedEngine::loop, replica 0), tp, dp, more_loops (replicas 1..), replicas (the
// router over all of them; with dp == 1 it routes everything to `loop`) and placement. Throws
// Error naming the flag, file or tensor at fault (e.g. --tp not dividing the KV heads).
LoadedEngine load_replicas(const ReplicaLoadOptions& opt);

// Before staging: throws Error with the bytes the tp ranks' staged weights need, the bytes
// available and how many layers would fit, when `available` cannot hold them.
// The KV pool request of a replica from the engine options: blocks of bytes_per_block bytes
// (every rank of the replica together), `available` bytes of free memory to plan against, less
// what the replica's `engines` drafters keep beside the pool (drafter_kept_hidden_bytes each;
// --pp-virtual-engines: one drafter per engine).
KvCapacityRequest kv_capacity_request(const EngineLoadOptions& eo, int64_t bytes_per_block, int64_t available,
                                      int32_t engines = 1);

void check_weights_fit(const Checkpoint& ck, const Backend& stager, int tp, size_t available,
                       const StagedFormats* formats = nullptr);

// The staged formats the engine options ask for (--quantization, --quantization-group) with the
// experts' split among TP ranks (--enable-expert-parallel: an Error when the model has no experts).
StagedFormats staged_formats_for(const Checkpoint& ck, const EngineLoadOptions& eo);

// Hybrid models (Gated DeltaNet): the state snapshots for prefix caching (engine/state_snapshots.h)
// the cache config asks for, else one per running sequence (at least 4); 0 for other models or
// without prefix caching.
int32_t hybrid_state_snapshots(const ModelConfig& cfg, const EngineLoadOptions& eo);
// Sets a rank's staged hybrid weights' state pool: a slot per running sequence, the snapshots and
// the speculative rollback depth (every rank of a replica must agree: the engine numbers them).
// engines: the engines sharing the rank (--pp-virtual-engines: pp), each owning a run of
// --max-num-seqs slots and one of snapshots (step_pipeline.h VirtualEngineShare), so the pool
// holds engines times as many.
void set_hybrid_state_pool(Qwen3Weights& w, const EngineLoadOptions& eo, int32_t engines = 1);
// Bytes of the Gated DeltaNet state pools of one replica (slots, snapshots, rollback states of
// each of its `engines` engines; 0 for other models), logged as the threads backend logs them.
int64_t hybrid_state_bytes(const ModelConfig& cfg, const EngineLoadOptions& eo, int32_t engines = 1);
// --pp-virtual-engines: engine g's share of a replica's pools (its blocks_per_engine KV blocks,
// and on a hybrid its --max-num-seqs state slots and its snapshot entries).
VirtualEngineShare virtual_engine_share(const ModelConfig& cfg, const EngineLoadOptions& eo, int g,
                                        int64_t blocks_per_engine);

// One rank, one replica (tp = dp = 1) on opt.cores (empty: every core, threads unpinned): the same
// start-up as the server's, so the sampler runs on the kernel pool here too (bench_engine, tests).
LoadedEngine load_engine(const EngineLoadOptions& opt);

}  // namespace pypto
