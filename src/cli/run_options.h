#pragma once
// The seed's command line for serve mode (default) and offline mode (--prompt): model, device
// groups, engine limits and KV cache sizing, generation defaults.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/model_runner.h"
#include "parallel/device_groups.h"
#include "parallel/replicas/load_replicas.h"

namespace pypto::cli {

struct RunOptions {
  std::string model;  // empty: the built-in default model
  std::string served_model_name;
  std::string backend = "cpu";
  std::string platform = "auto";
  int device = 0;
  std::string devices;  // "0,1"
  int tp = 1, dp = 1;
  int pp = 1;                // --pp: pipeline stages (each of tp ranks)
  int pp_micro_batches = kDefaultPipelineMicroBatches;  // --pp-micro-batches
  int64_t pp_micro_batch_tokens = kDefaultMicroBatchMinTokens;  // --pp-micro-batch-tokens
  bool pp_virtual_engines = false;  // --pp-virtual-engines (parallel/replicas/step_pipeline.h)
  // auto | mp | mpi | threads; validate_run_options() resolves auto (mp when dp == 1 and tp > 1).
  std::string distributed_executor_backend = "auto";
  // Ranks as processes (set by cmd_run; ReplicaLoadOptions says what each is).
  std::shared_ptr<Communicator> process_comm;  // every rank of every replica
  std::shared_ptr<Communicator> replica_comm;  // this rank's replica (process_comm when dp == 1)
  std::shared_ptr<Communicator> stage_comm;    // --pp with --tp > 1: the stage's TP group
  std::vector<std::shared_ptr<Communicator>> link_comms;  // --dp > 1: rank 0 <-> replica leaders
  std::shared_ptr<Communicator> return_comm;  // --pp-virtual-engines: last stage's TP rank 0 -> rank 0
  void drop_communicators() {
    return_comm.reset();
    process_comm.reset();
    replica_comm.reset();
    stage_comm.reset();
    link_comms.clear();
  }
  std::string data_parallel_routing = "least_pending_tokens";
  int64_t data_parallel_affinity_slack = kDefaultAffinitySlackTokens;  // prefix_affinity, tokens
  std::string cpu_groups;  // "0-7,8-15": the cores of device 0, 1, ... (default: equal split)
  bool cpu_oversubscribe = false;  // more devices than cores: devices share cores round-robin
  ParallelLayout layout;   // filled by validate_run_options
  std::string dtype = "auto";
  int ep = 1;                      // --ep: only 1 (the seed's DeepSeek option)
  bool enable_expert_parallel = false;  // --enable-expert-parallel: Qwen3-MoE experts whole per TP rank
  std::string speculative_config;  // --speculative-config JSON (engine/speculative_config.h); "" = off
  // --per-request-spec-decode-stats none | summary | detailed (engine/spec_request_stats.h); needs
  // --speculative-config when not none.
  std::string per_request_spec_decode_stats = "none";
  bool show_startup_logs = false;  // the seed's flag; start-up logs are always shown
  std::string kv_cache_dtype = "bf16";
  std::string matmul_precision = "high";  // highest | high | medium (kernels/backend.h)
  std::string gdn_prefill = "recurrent";  // recurrent | chunked (model/gdn_prefill.h)
  std::string cpu_linear_kernel = "auto";  // auto | f32 | bf16dot | amx (kernels/backend.h)
  std::string quantization = "none";      // none | int8 | int4 (model/weight_staging.h)
  int quantization_group = 64;            // int4: inputs per scale and zero point
  int64_t max_model_len = 1024;
  std::string hf_overrides;  // --hf-overrides: JSON object over config.json's top-level keys
  std::string runner = "auto";  // --runner auto | generate | pooling | rerank (io/pooling_config.h)
  int32_t block_size = 16;
  std::optional<double> memory_utilization;  // unset: the CPU default KV size (engine/kv_capacity.h)
  std::string kv_cache_memory;
  int32_t max_num_seqs = 16;
  int64_t max_num_batched_tokens = 4096;
  int64_t long_prefill_token_threshold = 2048;
  bool enable_prefix_caching = true;
  int32_t state_snapshots = 0;            // hybrids: GDN state snapshot entries (0: max(4, --max-num-seqs))
  int64_t state_snapshot_interval = -1;   // hybrids: tokens between snapshots (-1: 64 blocks, 0: chunk ends only)
  bool enable_chunked_prefill = true;
  int threads = 0;
  bool use_compile_cache = false;
  std::string compile_cache_dir;  // empty: default_compile_cache_dir()
  // offline
  std::vector<std::string> prompts;
  std::vector<std::string> prompt_token_ids;
  std::string generate_config = "{}";
  std::string output_json;
  // profiling (offline: report after generation; serve: /start_profile and /stop_profile)
  bool profile = false;
  std::string profile_level = "e2e,kernel";  // comma list of e2e, kernel, verbose (the seed's default)
  bool profile_level_given = false;          // --profile-level was on the command line
  std::string profile_output;         // DIR or FILE.json for the Chrome/Perfetto trace
  // serve
  std::string host = "0.0.0.0";
  int port = 8000;

  nlohmann::json generate_config_json;  // parsed --generate-config
};

// Registers every flag on `app`.
void add_run_options(CLI::App& app, RunOptions& o);
// Cross-flag validation after parsing (device groups, parallel sizes, dtypes); Error on misuse.
void validate_run_options(RunOptions& o);
// The engine's load options from the flags (model dir resolved), for load_engine(): one rank, one
// replica. Error when --tp or --dp is not 1 (naming load_replicas, which honours them).
EngineLoadOptions engine_load_options(const RunOptions& o, const std::string& model_dir);
// The same plus the device layout and routing: load_replicas(replica_load_options(o, dir)) starts
// dp replicas of tp ranks each (with dp = tp = 1 the same engine as load_engine()).
ReplicaLoadOptions replica_load_options(const RunOptions& o, const std::string& model_dir);

}  // namespace pypto::cli
