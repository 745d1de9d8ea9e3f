#include "cli/run_options.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "cli/generate_config.h"
#include "core/error.h"
#include "core/kv_dtype.h"
#include "core/log.h"
#include "core/memory.h"
#include "core/profiler.h"
#include "engine/spec_request_stats.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "model/compile_cache.h"
#include "model/gdn_prefill.h"

namespace pypto::cli {

void add_run_options(CLI::App& app, RunOptions& o) {
  app.add_option("--model", o.model, "checkpoint directory (default: the built-in random-weight model)");
  app.add_option("--served-model-name", o.served_model_name, "name reported by /v1/models (default: directory name)");
  // The seed's command lines carry its Ascend NPU's --backend npu and --platform a2a3 (DESIGN.md
  // maps them to --backend cpu|cuda and --platform auto): say so instead of a bare "not in".
  app.add_option("--backend", o.backend, "compute backend: cpu, or cuda (the seed's npu maps to these)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "cpu" || v == "cuda") return "";
            if (v == "npu")
              return "npu is the Ascend NPU backend of the seed's implementation; this one runs on CPUs: use "
                     "--backend cpu (the default) or leave --backend out";
            return "'" + v + "' is not a backend; allowed: cpu, cuda";
          },
          "{cpu,cuda}"))
      ->capture_default_str();
  app.add_option("--platform", o.platform, "target platform: auto (the seed's a2a3/a5 name Ascend NPUs)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            if (v == "auto") return "";
            if (v == "a2a3" || v == "a2a3sim" || v == "a5" || v == "a5sim")
              return v + " is an Ascend NPU platform of the seed's implementation; this one picks the CPU's "
                         "kernels itself: leave --platform out (or --platform auto)";
            return "'" + v + "' is not a platform; allowed: auto";
          },
          "{auto}"))
      ->capture_default_str();
  app.add_option("--device", o.device, "device id when --devices is absent")->capture_default_str();
  app.add_option("--devices", o.devices, "comma-separated device ids (dp x tp of them); on CPU a device is a core group");
  app.add_option("--tp,--tensor-parallel-size", o.tp, "devices per replica")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--dp,--data-parallel-size", o.dp, "engine replicas")->check(CLI::PositiveNumber)->capture_default_str();
  // Checked by validate_run_options (and against the layer count at load) with the limit named.
  app.add_option("--pp,--pipeline-parallel-size", o.pp,
                 "pipeline stages per replica: the layers split into this many stages balanced by bytes, each on "
                 "its own --tp ranks (a replica has pp x tp ranks / devices)")
      ->capture_default_str();
  app.add_option("--pp-micro-batches", o.pp_micro_batches,
                 "with --pp > 1: each step's batch goes through the stages in up to this many micro-batches "
                 "(whole sequences), so stage s works on part i+1 while stage s+1 works on part i")
      ->capture_default_str();
  app.add_flag("--pp-virtual-engines", o.pp_virtual_engines,
               "with --pp > 1: run --pp engines over each replica's stages, each with its own sequences and 1/pp of "
               "the KV blocks, so that consecutive steps are in flight together (vLLM's virtual engines)");
  app.add_option("--pp-micro-batch-tokens", o.pp_micro_batch_tokens,
                 "with --pp > 1: the fewest tokens a micro-batch may have (a step is cut into fewer parts rather "
                 "than smaller ones: each part streams the stage's weights again, so small decode steps stay whole)")
      ->capture_default_str();
  app.add_option("--distributed-executor-backend", o.distributed_executor_backend,
                 "how the --tp ranks run: mp (processes on this host, shared memory; the default when --dp is 1), "
                 "mpi (processes started by mpirun, on one host or several), threads (one process; the default "
                 "with --dp > 1)")
      ->check(CLI::IsMember({"auto", "mp", "mpi", "threads"}))
      ->capture_default_str();
  app.add_option("--data-parallel-routing", o.data_parallel_routing, "how requests are spread over replicas")
      ->check(CLI::IsMember({"least_pending_tokens", "round_robin", "prefix_affinity"}))
      ->capture_default_str();
  app.add_option("--data-parallel-affinity-slack", o.data_parallel_affinity_slack,
                 "prefix_affinity: pending tokens a replica holding the prefix may carry above the least loaded")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--ep,--expert-parallel-size", o.ep,
                 "expert parallelism size: 1 (the seed's DeepSeek option); for Qwen3-MoE pass "
                 "--enable-expert-parallel with --tp N")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            return v == "1" ? "" : v + ": --ep is the seed's DeepSeek option; for Qwen3-MoE pass --enable-expert-parallel "
                                       "with --tp N (each of the N ranks then holds num_experts / N whole experts), and "
                                       "leave --ep out";
          },
          "1"))
      ->capture_default_str();
  app.add_flag("--enable-expert-parallel", o.enable_expert_parallel,
               "Qwen3-MoE under --tp N: each rank holds num_experts / N whole experts (without it every rank holds "
               "1/N of every expert's intermediate columns)");
  app.add_option("--speculative-config", o.speculative_config,
                 "speculative decoding, vLLM's JSON: {\"method\": \"ngram\", \"num_speculative_tokens\": k, "
                 "\"prompt_lookup_max\": M, \"prompt_lookup_min\": m} or a draft model {\"model\": DIR, "
                 "\"num_speculative_tokens\": k, \"quantization\": \"none|int8|int4\"} (same vocabulary and "
                 "tokenizer; unsharded on each replica's rank 0), {\"method\": \"mtp\", ...} or an EAGLE-3 head "
                 "{\"method\": \"eagle3\", \"model\": DIR, \"num_speculative_tokens\": k} (Qwen3 and Qwen3-MoE targets) (docs/api.md)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              parse_speculative_config(v);
            } catch (const Error& e) {
              return e.what();
            }
            return "";
          },
          "JSON"));
  // vLLM's flag; its newest releases name it --per-request-spec-decode-metrics (accepted too).
  app.add_option("--per-request-spec-decode-stats,--per-request-spec-decode-metrics", o.per_request_spec_decode_stats,
                 "with --speculative-config: none | summary | detailed; summary adds each choice's "
                 "speculative_decoding_stats (drafts, accepted, acceptance histogram) to completions and chat "
                 "responses (the last chunk when streaming) and to --output-json; detailed adds the per-step "
                 "counts (docs/api.md)")
      ->check(CLI::Validator(
          [](std::string& v) -> std::string {
            try {
              parse_spec_stats_level(v);
            } catch (const Error& e) {
              return e.what();
            }
            return "";
          },
          "{none,summary,detailed}"))
      ->capture_default_str();
  app.add_flag("--show-startup-logs", o.show_startup_logs,
               "accepted for the seed's command lines: start-up logs are always shown here");
  app.add_option("--cpu-groups", o.cpu_groups,
                 "CPU: the cores of each device, e.g. 0-7,8-15 (a group may join ranges with +); default: equal split");
  app.add_flag("--cpu-oversubscribe", o.cpu_oversubscribe,
               "CPU: when the devices outnumber the cores, let devices share cores (device d on core d mod the core "
               "count) instead of refusing; the ranks then compete for cores (for correctness runs on small machines)");
  app.add_option("--dtype", o.dtype, "weight dtype: auto, or the checkpoint's own (weights are never converted)")
      ->check(CLI::IsMember({"auto", "bfloat16", "bf16", "float16", "f16", "float32", "f32"}))
      ->capture_default_str();
  app.add_option("--kv-cache-dtype", o.kv_cache_dtype,
                 "KV cache element type: auto (= bf16), bf16, fp32, or 8-bit int8 / fp8 (= fp8_e4m3) with one f32 "
                 "scale per token and KV head (about half of bf16's memory; error in docs/status.md)")
      ->check(CLI::IsMember(std::vector<std::string>(std::begin(kKvCacheDtypeNames), std::end(kKvCacheDtypeNames))))
      ->capture_default_str();
  app.add_option("--hf-overrides", o.hf_overrides,
                 "JSON object whose top-level keys replace config.json's (text_config / vision_config are merged "
                 "key by key, as vLLM does), e.g. '{\"rope_scaling\": {\"rope_type\": \"yarn\", \"factor\": 4.0, "
                 "\"original_max_position_embeddings\": 32768}}' for 131,072 tokens");
  app.add_option("--runner", o.runner,
                 "auto | generate | pooling | rerank: pooling serves embeddings (/v1/embeddings) or, with the "
                 "Qwen3-Reranker --hf-overrides, scores (/v1/rerank, /v1/score); rerank is short for pooling with "
                 "those overrides; auto picks pooling for an embedding checkpoint (no lm_head, sentence-transformers "
                 "files)")
      ->check(CLI::IsMember({"auto", "generate", "pooling", "rerank"}))
      ->capture_default_str();
  app.add_option("--max-model-len", o.max_model_len, "prompt + generated tokens per request")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--block-size", o.block_size, "tokens per KV block")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--memory-utilization,--npu-memory-utilization", o.memory_utilization,
                 "size the KV cache as this fraction of the memory free after the weights (the GPU convention)")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--kv-cache-memory", o.kv_cache_memory,
                 "KV cache size, e.g. 4GiB (overrides --memory-utilization). Default: room for --max-num-seqs x "
                 "--max-model-len tokens plus half as much for the prefix cache (without "
                 "--no-enable-prefix-caching), at most 0.9 of the memory free after the weights");
  app.add_option("--max-num-seqs", o.max_num_seqs, "running requests per replica")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "token budget of one engine step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--long-prefill-token-threshold", o.long_prefill_token_threshold, "largest prefill chunk per request and step")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag("--enable-prefix-caching,!--no-enable-prefix-caching", o.enable_prefix_caching, "reuse KV of shared prompt prefixes")
      ->capture_default_str();
  app.add_option("--state-snapshots", o.state_snapshots,
                 "hybrid models (Qwen3.5 / Qwen3.6): Gated DeltaNet state snapshots the prefix cache keeps (a hit "
                 "resumes only where one was taken; each costs one sequence's state). 0: max(4, --max-num-seqs)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--state-snapshot-interval", o.state_snapshot_interval,
                 "hybrid models: also snapshot the state every this many tokens (a multiple of --block-size; 0: only "
                 "at each prompt chunk's and turn's last block boundary). Default -1: 64 blocks")
      ->capture_default_str();
  app.add_flag("--enable-chunked-prefill,!--no-enable-chunked-prefill", o.enable_chunked_prefill,
               "split long prompts over steps")
      ->capture_default_str();
  app.add_option("--matmul-precision", o.matmul_precision,
                 "inputs of the matrix products: highest (f32), high (two bf16, ~16 bits, logits within ~1e-5 "
                 "of f32; int8/int4/AWQ weights too, W4A16/W8A16, as int16 per 64-input block on AVX2-only "
                 "CPUs, logits within ~1e-4), medium (fastest: one bf16 for bf16 weights, "
                 "x and W both one bf16 for f16 weights with AVX512_BF16, logits off by ~1e-2; int8 activations per token for int8/int4/AWQ weights, W4A8/W8A8, off by "
                 "~1e-2 and more with outlier channels). FP8 weights always take f32 activations")
      ->check(CLI::IsMember({"highest", "high", "medium"}))
      ->capture_default_str();
  app.add_option("--gdn-prefill", o.gdn_prefill, kGdnPrefillHelp)
      ->check(CLI::IsMember({"recurrent", "chunked"}))
      ->capture_default_str();
  app.add_option("--cpu-linear-kernel", o.cpu_linear_kernel,
                 "kernel for bf16 weights at high/medium: auto (per CPU), f32, bf16dot (AVX-512 BF16), amx "
                 "(AMX tiles). On this CPU auto runs " + describe_cpu_linear_choice())
      ->check(CLI::IsMember({"auto", "f32", "bf16dot", "amx"}))
      ->capture_default_str();
  app.add_option("--quantization", o.quantization,
                 "quantize an unquantized checkpoint while staging: int8 (per output row; 16-bit activations at "
                 "high: bf16x2, or int16 blocks on AVX2; int8 at medium, f32 at highest), int4 (groups of --quantization-group inputs with zero points), "
                 "none. FP8 and AWQ checkpoints are detected from config.json and run as stored")
      ->check(CLI::IsMember({"none", "int8", "int4"}))
      ->capture_default_str();
  app.add_option("--quantization-group", o.quantization_group, "int4: inputs per scale and zero point (a multiple of 8)")
      ->capture_default_str();
  app.add_option("--threads", o.threads, "compute threads (default: all cores of the device group)")->check(CLI::PositiveNumber);
  app.add_flag("--use-compile-cache,!--no-use-compile-cache", o.use_compile_cache,
               "keep staged weights in a fingerprinted cache and map them on the next start")
      ->capture_default_str();
  app.add_option("--compile-cache-dir", o.compile_cache_dir, "compile cache directory (default: ~/.cache/pypto-serving/compile-cache)");
  app.add_option("--prompt", o.prompts, "offline mode: a prompt (repeatable; run concurrently)");
  app.add_option("--prompt-token-ids", o.prompt_token_ids, "offline mode: a prompt as ids 1,2,3 (repeatable)");
  app.add_option("--generate-config", o.generate_config, "JSON generation options (offline: per prompt; serve: defaults)")
      ->capture_default_str();
  app.add_option("--output-json", o.output_json, "offline mode: also write the results as JSON to this file");
  app.add_flag("--profile", o.profile, "offline: print a timing report after generation; serve: enable /start_profile");
  app.add_option("--profile-level", o.profile_level,
                 "profile detail, a comma list of e2e (steps, phases, requests), kernel (+ per layer and op), "
                 "verbose (+ per-step tables); the most detailed one named applies")
      ->each([&o](const std::string&) { o.profile_level_given = true; })
      ->capture_default_str();
  app.add_option("--profile-output", o.profile_output, "write a Chrome/Perfetto trace: a DIR, or FILE.json");
  app.add_option("--host", o.host, "serve mode: bind address")->capture_default_str();
  app.add_option("--port", o.port, "serve mode: port (0: any free port, printed at start)")->check(CLI::Range(0, 65535))->capture_default_str();
}

namespace {

// The cores the device groups are cut from: this process's, repeated round-robin under
// --cpu-oversubscribe until every device id (and every rank) can have one.
std::vector<int> layout_cores(const RunOptions& o) {
  std::vector<int> cores = available_cores();
  if (!o.cpu_oversubscribe || cores.empty()) return cores;
  if (!o.cpu_groups.empty()) fail("--cpu-oversubscribe and --cpu-groups: give one of them (groups name their cores)");
  size_t want = size_t(o.dp) * size_t(o.tp) * size_t(o.pp);
  if (!o.devices.empty())
    for (int d : parse_device_list("--devices", o.devices)) want = std::max(want, size_t(d) + 1);
  for (size_t i = 0; cores.size() < want; ++i) cores.push_back(cores[i]);
  return cores;
}

}  // namespace

namespace {
// Whether this run's --tp / --pp ranks must be threads of one process (what
// --distributed-executor-backend auto picks then): the rank-process path carries no pooling heads
// (load_replicas.cpp); hybrids run there when asked for (mp / mpi) but default to threads, the
// layout their logits checks cover (tests/reference/check_hybrid_logits_cli.py). A pooling runner: --runner
// pooling | rerank, or under auto a local checkpoint with sentence-transformers files (what auto
// serves as an embedding model) or vLLM's reranker overrides; any other pooling checkpoint is
// refused later with the flag to add. A hybrid: config.json with --hf-overrides applied says so;
// an unreadable config says no here, and the loader reports it. An EAGLE-3 head runs beside thread
// ranks only (parallel/replicas/eagle3_load.h); an unreadable --speculative-config is reported later.
bool ranks_need_threads(const RunOptions& o) {
  const std::filesystem::path md(o.model);
  if (o.runner == "pooling" || o.runner == "rerank") return true;
  if (!o.speculative_config.empty()) {
    try {
      if (parse_speculative_config(o.speculative_config).method == SpeculativeMethod::Eagle3) return true;
    } catch (const std::exception&) {
    }
  }
  if (o.runner == "auto" && (o.hf_overrides.find("SequenceClassification") != std::string::npos ||
                             (!o.model.empty() && (std::filesystem::is_regular_file(md / "modules.json") ||
                                                   std::filesystem::is_regular_file(md / "1_Pooling/config.json")))))
    return true;
  if (o.model.empty()) return false;
  try {
    return read_model_config(o.model, o.hf_overrides).hybrid();
  } catch (const std::exception&) {
    return false;
  }
}
}  // namespace

void validate_run_options(RunOptions& o) {
  if (o.backend == "cuda") fail("--backend cuda: this build has no CUDA backend yet (use --backend cpu)");
  if (o.pp < 1)
    fail("--pp ", o.pp, ": expected a positive number of pipeline stages (1 up to the model's num_hidden_layers)");
  if (o.pp_micro_batches < 1 || o.pp_micro_batches > 1024)
    fail("--pp-micro-batches ", o.pp_micro_batches, ": expected a number of micro-batches between 1 and 1024");
  if (o.pp_micro_batch_tokens < 1)
    fail("--pp-micro-batch-tokens ", o.pp_micro_batch_tokens, ": expected a positive number of tokens");
  if (o.distributed_executor_backend == "auto")
    o.distributed_executor_backend = o.dp == 1 && o.tp * o.pp > 1 && !ranks_need_threads(o) ? "mp" : "threads";
  const std::string& deb = o.distributed_executor_backend;
  if (o.pp_virtual_engines && o.pp < 2)
    fail("--pp-virtual-engines runs --pp engines over the pipeline stages of a replica: it needs --pp >= 2 (got --pp ",
         o.pp, ")");
  if (o.pp_virtual_engines && o.dp != 1 && deb != "threads")
    fail("--pp-virtual-engines with --dp ", o.dp, " needs --distributed-executor-backend threads (processes: --dp 1; "
         "got ", deb, ")");
  if (deb == "mpi") {
    // Each rank is its own process, on its own host or with the cores mpirun bound it to.
    if (!o.devices.empty() || !o.cpu_groups.empty() || o.cpu_oversubscribe)
      fail("--devices/--cpu-groups/--cpu-oversubscribe do not apply to --distributed-executor-backend mpi: each rank "
           "uses the cores mpirun gives its process (mpirun --bind-to / --map-by)");
    o.layout = ParallelLayout{};
    o.layout.tp = o.tp;
    o.layout.pp = o.pp;
    o.layout.dp = o.dp;
    for (int t = 0; t < o.dp * o.tp * o.pp; ++t) {
      o.layout.devices.push_back(t);
      o.layout.cores.push_back(available_cores());
    }
  } else {
    // Device groups: len(devices) == dp × tp, no duplicates; each device a group of cores.
    o.layout = plan_parallel_layout(o.device, o.devices, o.tp, o.dp, o.cpu_groups, layout_cores(o), o.pp);
  }
  // --pp-virtual-engines: the router spreads requests over the pipeline's engines as over replicas.
  if (o.dp == 1 && !o.pp_virtual_engines && o.data_parallel_routing != "least_pending_tokens")
    log_warn("--data-parallel-routing ", o.data_parallel_routing, " has no effect with --dp 1");
  // --dtype names the checkpoint's own dtype (the seed passes bfloat16) or auto; the loader
  // refuses any other, since weights are never converted.
  o.generate_config_json = parse_generate_config(o.generate_config);
  if (!o.compile_cache_dir.empty() && !o.use_compile_cache)
    fail("--compile-cache-dir needs --use-compile-cache");
  if (!o.prompts.empty() && !o.prompt_token_ids.empty())
    fail("give --prompt or --prompt-token-ids, not both");
  if (!o.profile && (!o.profile_output.empty() || o.profile_level_given))
    fail("--profile-level and --profile-output need --profile");
  if (prof::parse_level(o.profile_level) == prof::Level::Off)
    fail("--profile-level off: to profile nothing, leave out --profile");
  // Refused rather than ignored: without drafts every count would be 0, which reads like a
  // drafter that never matched.
  if (parse_spec_stats_level(o.per_request_spec_decode_stats) != SpecStatsLevel::None && o.speculative_config.empty())
    fail("--per-request-spec-decode-stats ", o.per_request_spec_decode_stats,
         " reports speculative decoding per request: it needs --speculative-config");
  if (!o.output_json.empty() && o.prompts.empty() && o.prompt_token_ids.empty())
    fail("--output-json is for offline mode: give --prompt or --prompt-token-ids");
}

namespace {

// The per-replica engine options (everything but the device layout).
EngineLoadOptions engine_options(const RunOptions& o, const std::string& model_dir) {
  EngineLoadOptions e;
  e.model_dir = model_dir;
  e.hf_overrides = o.hf_overrides;
  e.runner = parse_runner(o.runner);
  e.scheduler.max_num_seqs = o.max_num_seqs;
  e.scheduler.max_num_batched_tokens = o.max_num_batched_tokens;
  e.scheduler.max_model_len = o.max_model_len;
  e.scheduler.enable_chunked_prefill = o.enable_chunked_prefill;
  e.scheduler.long_prefill_token_threshold = o.long_prefill_token_threshold;
  e.scheduler.speculative = parse_speculative_config(o.speculative_config);
  e.cache.block_size = o.block_size;
  e.cache.enable_prefix_caching = o.enable_prefix_caching;
  e.cache.state_snapshots = o.state_snapshots;
  e.cache.state_snapshot_interval = o.state_snapshot_interval;
  if (!o.kv_cache_memory.empty())
    e.kv_cache_memory = static_cast<int64_t>(parse_byte_size("--kv-cache-memory", o.kv_cache_memory.c_str()));
  e.memory_utilization = o.memory_utilization;
  e.kv_cache_dtype = parse_kv_cache_dtype(o.kv_cache_dtype);
  if (o.dtype == "bfloat16" || o.dtype == "bf16") e.weight_dtype = DType::BF16;
  if (o.dtype == "float16" || o.dtype == "f16") e.weight_dtype = DType::F16;
  if (o.dtype == "float32" || o.dtype == "f32") e.weight_dtype = DType::F32;
  e.threads = o.threads;
  e.matmul_precision = parse_matmul_precision(o.matmul_precision);
  e.cpu_linear_kernel = parse_cpu_linear_kernel(o.cpu_linear_kernel);
  e.gdn_prefill = parse_gdn_prefill(o.gdn_prefill);
  e.quantization = parse_quantization(o.quantization);
  if (o.quantization_group < 8 || o.quantization_group % 8 != 0)
    fail("--quantization-group must be a positive multiple of 8, got ", o.quantization_group);
  e.int4_group = o.quantization_group;
  e.expert_parallel = o.enable_expert_parallel;
  if (o.use_compile_cache) e.compile_cache_dir = o.compile_cache_dir.empty() ? default_compile_cache_dir() : o.compile_cache_dir;
  return e;
}

}  // namespace

EngineLoadOptions engine_load_options(const RunOptions& o, const std::string& model_dir) {
  // load_engine() builds one rank of one replica: dropping --tp/--dp here would silently run a
  // different configuration than asked for.
  if (o.tp != 1 || o.dp != 1 || o.pp != 1)
    fail("--tp ", o.tp, " --dp ", o.dp, " --pp ", o.pp, ": engine_load_options()/load_engine() start a single rank; use "
         "load_replicas(replica_load_options(...)) (parallel/replicas/load_replicas.h) for tensor/data parallelism");
  return engine_options(o, model_dir);
}

ReplicaLoadOptions replica_load_options(const RunOptions& o, const std::string& model_dir) {
  ReplicaLoadOptions r;
  r.engine = engine_options(o, model_dir);
  r.layout = o.layout.cores.empty()
                 ? plan_parallel_layout(o.device, o.devices, o.tp, o.dp, o.cpu_groups, layout_cores(o), o.pp)
                 : o.layout;
  r.stage_comm = o.stage_comm;
  r.replica_comm = o.replica_comm;
  r.link_comms = o.link_comms;
  r.pp_micro_batches = MicroBatchPolicy{o.pp_micro_batches, o.pp_micro_batch_tokens};
  r.pp_virtual_engines = o.pp_virtual_engines;
  r.return_comm = o.return_comm;
  r.routing = parse_routing_policy(o.data_parallel_routing);
  r.process_comm = o.process_comm;
  r.affinity_slack_tokens = o.data_parallel_affinity_slack;
  return r;
}

}  // namespace pypto::cli
