#pragma once
// Start-up for --speculative-config method mtp: the target is staged with its MTP head
// (StagingOptions::mtp), the MTP layer's KV pool is sized with the target's (its bytes per block
// are added to the target's, so one memory budget covers both), and the engine runs the target
// through MtpExecutor (the hidden states the drafter reads) on one rank per replica, or through
// MtpTpExecutor under --tp (thread ranks), the MTP head sharded like the target's layers. Rank
// processes (--distributed-executor-backend mp / mpi, any --dp) start it in rank_worker.cpp
// (mtp_rank_pass.h); --pp-virtual-engines in mtp_virtual_engines.h. Every layout runs it.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_executor.h"
#include "engine/model_runner.h"
#include "model/qwen3_weights.h"
#include "parallel/replicas/tp_model_runner.h"

namespace pypto {

class DraftProposer;
struct ReplicaLoadOptions;

// The MTP layer's KV pool in blocks for a target pool of target_blocks: what the target holds of
// a request plus its k - 1 lookahead rows (every rank computes it from the agreed block count).
int64_t mtp_kv_blocks(int64_t target_blocks, const EngineLoadOptions& eo);

// Bytes the hidden-state drafter of one engine (MTP and EAGLE-3 both draft through MtpProposer)
// keeps beside its KV pool: with the cost model on, a stretch with speculation off keeps the
// target's hidden rows, up to MtpProposer::kKeptHiddenBytes over all requests, so the context
// refills in one pass (engine/mtp_proposer.h). 0 for the other methods and with "cost_model": false
// (then only the last step's rows are kept, working memory like the step's activations).
int64_t drafter_kept_hidden_bytes(const SpeculativeConfig& spec);

// KV bytes of one block of the MTP layer (one full-attention layer of the target's shape) over the
// ranks of a replica that run the head (those holding lm_head: each its share of the KV heads).
int64_t mtp_kv_bytes_per_block(const std::vector<std::shared_ptr<const Qwen3Weights>>& ranks,
                               const EngineLoadOptions& eo);

// The target's executor and the MTP drafter over the staged target (its `mtp` weights), on
// `backend`; the executor keeps weights, backend, model and caches alive. *drafter receives the
// proposer for EngineConfig::drafter.
std::unique_ptr<ModelExecutor> make_mtp_executor(std::shared_ptr<const Qwen3Weights> target,
                                                 std::unique_ptr<Backend> backend, int64_t num_blocks,
                                                 const EngineLoadOptions& eo, std::shared_ptr<DraftProposer>* drafter);

// --tp / --pp (thread ranks): the replica's TpModelRunner over `ranks` (pp stages, micro-batches
// `micro`) with the MTP drafter sharded over its last stage's TP ranks
// (parallel/replicas/mtp_tp_executor.h).
std::unique_ptr<ModelExecutor> make_mtp_tp_executor(std::vector<TpRankParts> ranks, int pp, MicroBatchPolicy micro,
                                                    int64_t num_blocks, const EngineLoadOptions& eo,
                                                    const std::string& track_prefix,
                                                    std::shared_ptr<DraftProposer>* drafter);
}  // namespace pypto
