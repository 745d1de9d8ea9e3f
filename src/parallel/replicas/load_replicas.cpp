#include "parallel/replicas/load_replicas.h"

#include <chrono>

#include "core/cpu_features.h"
#include "core/error.h"
#include "core/kv_dtype.h"
#include "core/log.h"
#include "core/memory.h"
#include "engine/draft_model_proposer.h"
#include "engine/engine.h"
#include "io/checkpoint.h"
#include "model/gdn_state.h"
#include "model/weight_staging.h"
#include "parallel/replicas/draft_load.h"
#include "parallel/replicas/eagle3_load.h"
#include "parallel/replicas/eagle3_virtual_engines.h"
#include "parallel/replicas/mtp_load.h"
#include "parallel/replicas/mtp_virtual_engines.h"
#include "parallel/replicas/pooling_load.h"
#include "parallel/replicas/rank_worker.h"
#include "parallel/replicas/step_pipeline.h"
#include "parallel/replicas/tp_model_runner.h"
#include "parallel/shm_communicator.h"

namespace pypto {

KvCapacityRequest kv_capacity_request(const EngineLoadOptions& eo, int64_t bytes_per_block, int64_t available,
                                      int32_t engines) {
  PYPTO_ASSERT(engines >= 1, engines, " engines");
  KvCapacityRequest kr;
  kr.bytes_per_block = bytes_per_block;
  kr.block_size = eo.cache.block_size;
  kr.max_model_len = eo.scheduler.max_model_len;
  kr.kv_cache_memory = eo.kv_cache_memory;
  kr.memory_utilization = eo.memory_utilization;
  kr.max_num_seqs = eo.scheduler.max_num_seqs;
  kr.prefix_caching = eo.cache.enable_prefix_caching;
  kr.available_bytes = available;
  kr.drafter_bytes = drafter_kept_hidden_bytes(eo.scheduler.speculative) * engines;
  return kr;
}

StagedFormats staged_formats_for(const Checkpoint& ck, const EngineLoadOptions& eo) {
  StagedFormats f = staged_formats(ck, eo.quantization, eo.int4_group);
  if (eo.expert_parallel && !ck.config().has_sparse_layers())
    fail("--enable-expert-parallel: ", ck.dir(), " (", ck.config().architecture,
         ") has no mixture-of-experts layers; leave the flag out");
  f.expert_parallel = eo.expert_parallel;
  f.mtp = eo.scheduler.speculative.method == SpeculativeMethod::Mtp;  // the head rides with the target
  return f;
}

void check_weights_fit(const Checkpoint& ck, const Backend& stager, int tp, size_t available,
                       const StagedFormats* formats) {
  validate_qwen3_checkpoint(ck);
  size_t need = 0, base = 0;
  for (int t = 0; t < tp; ++t) {
    need += staged_slab_bytes(ck, stager, t, tp, -1, formats);
    base += staged_slab_bytes(ck, stager, t, tp, 0, formats);
  }
  if (need <= available) return;
  const int layers = ck.config().num_hidden_layers;
  const size_t per_layer = layers > 0 ? (need - base) / size_t(layers) : 0;
  const int64_t fit = available > base && per_layer > 0 ? int64_t((available - base) / per_layer) : 0;
  char n[32], a[32], b[32], l[32];
  fail(ck.dir(), ": the staged weights need ", format_bytes(need, n, sizeof n), " (", layers, " layers of ",
       format_bytes(per_layer, l, sizeof l), " + ", format_bytes(base, b, sizeof b),
       " embedding, lm_head and norms, ",
       formats && formats->layers != WeightFormat::Float ? formats->describe()
                                                          : dtype_name(ck.get(ck.config().tensor_prefix + "embed_tokens.weight").info->dtype),
       ") but this machine has ", format_bytes(available, a, sizeof a), " available (MemAvailable), so ",
       fit > 0 ? str_cat("at most ", fit, " of the ", layers, " layers would fit")
               : std::string("not even the embedding and lm_head fit"),
       ": free memory or choose a smaller checkpoint");
}

int32_t hybrid_state_snapshots(const ModelConfig& cfg, const EngineLoadOptions& eo) {
  eo.cache.validate_state_snapshots();
  if (!cfg.hybrid() || !eo.cache.enable_prefix_caching) return 0;
  return eo.cache.state_snapshots > 0 ? eo.cache.state_snapshots : std::max(4, eo.scheduler.max_num_seqs);
}

void set_hybrid_state_pool(Qwen3Weights& w, const EngineLoadOptions& eo, int32_t engines) {
  check_gdn_prefill(w.config, eo.gdn_prefill);
  PYPTO_ASSERT(engines >= 1, engines, " engines");
  if (!w.config.hybrid()) return;
  w.state_slots = engines * eo.scheduler.max_num_seqs;                // one GDN state per running sequence
  w.state_snapshots = engines * hybrid_state_snapshots(w.config, eo);  // prefix caching: copies at cached block boundaries
  w.state_rollback = eo.scheduler.speculative.num_speculative_tokens;  // speculative: states at drafts (0: off)
  w.gdn_prefill = eo.gdn_prefill;  // --gdn-prefill: the same form on every rank
}

VirtualEngineShare virtual_engine_share(const ModelConfig& cfg, const EngineLoadOptions& eo, int g,
                                        int64_t blocks_per_engine) {
  VirtualEngineShare share;
  share.block_offset = int32_t(g * blocks_per_engine);
  if (cfg.hybrid()) {  // set_hybrid_state_pool(..., engines) made room for every engine's
    share.state_slots = eo.scheduler.max_num_seqs;
    share.state_slot_offset = g * eo.scheduler.max_num_seqs;
    share.snapshot_offset = g * hybrid_state_snapshots(cfg, eo);
  }
  return share;
}

int64_t hybrid_state_bytes(const ModelConfig& cfg, const EngineLoadOptions& eo, int32_t engines) {
  if (!cfg.hybrid()) return 0;
  const int32_t snapshots = hybrid_state_snapshots(cfg, eo);
  const int32_t gdn_layers = cfg.num_hidden_layers - cfg.num_full_attention_layers();
  const size_t per_seq = GdnStatePool::bytes_per_slot(cfg, gdn_layers);
  // "= X per replica", or under --pp-virtual-engines "= X per engine, x E engines = E·X per
  // replica": every engine owns its slots, snapshots and rollback states (step_pipeline.h).
  auto per_replica = [&](int64_t states) {
    char x[32], t[32];
    format_bytes(size_t(per_seq) * size_t(states), x, sizeof x);
    if (engines == 1) return str_cat(x, " per replica");
    format_bytes(size_t(per_seq) * size_t(states) * size_t(engines), t, sizeof t);
    return str_cat(x, " per engine, x ", engines, " virtual engines = ", t, " per replica");
  };
  // Speculative decoding keeps k more states per sequence for rollback (model/gdn_rollback.h).
  const int64_t rollback = int64_t(eo.scheduler.max_num_seqs) * eo.scheduler.speculative.num_speculative_tokens;
  if (rollback > 0)
    log_info("GDN rollback states (speculative decoding): ", eo.scheduler.max_num_seqs, " sequences x ",
             eo.scheduler.speculative.num_speculative_tokens, " draft positions = ", per_replica(rollback));
  char a[32];
  log_info("Gated DeltaNet state pool: ", eo.scheduler.max_num_seqs, " sequences (--max-num-seqs) x ",
           format_bytes(per_seq, a, sizeof a), " (", gdn_layers, " GDN layers: conv [", cfg.linear_conv_kernel_dim - 1,
           ", ", cfg.gdn_conv_dim(), "] + recurrent [", cfg.linear_num_value_heads, ", ", cfg.linear_key_head_dim, ", ",
           cfg.linear_value_head_dim, "] f32) = ", per_replica(eo.scheduler.max_num_seqs),
           "; the KV cache covers the ", cfg.num_full_attention_layers(), " full-attention layers only");
  if (snapshots > 0)
    log_info("GDN state snapshots: ", snapshots, " x ", a, " = ", per_replica(snapshots),
             " (prefix caching resumes a hybrid only where one was taken: at each prompt chunk's and "
             "turn's last block boundary, every ", eo.cache.block_size, " tokens while decoding (the latest kept), "
             "and every ", eo.cache.snapshot_interval_tokens(), " tokens (0: none); least recently used first out)");
  return int64_t(per_seq) * engines * (eo.scheduler.max_num_seqs + snapshots + rollback);
}

void add_engine(LoadedEngine& out, std::vector<ReplicaSet::Replica>& engines, const EngineConfig& ec,
                std::unique_ptr<ModelExecutor> executor) {
  ReplicaSet::Replica r;
  r.load = std::make_shared<LoadBook>();
  auto reporting = std::make_unique<LoadReportingExecutor>(std::move(executor), r.load);
  auto loop = std::make_unique<EngineLoop>(std::make_unique<Engine>(ec, std::move(reporting)));
  r.loop = loop.get();
  if (!out.loop)
    out.loop = std::move(loop);
  else
    out.more_loops.push_back(std::move(loop));
  engines.push_back(std::move(r));
}

RouterOptions router_options(const ReplicaLoadOptions& opt, int64_t blocks_per_engine) {
  RouterOptions ro;
  ro.policy = opt.routing;
  ro.affinity_slack_tokens = opt.affinity_slack_tokens;
  ro.block_size = opt.engine.cache.block_size;
  ro.prefix_index_blocks = static_cast<size_t>(std::max<int64_t>(1, blocks_per_engine));
  ro.max_model_len = opt.engine.scheduler.max_model_len;
  return ro;
}

LoadedEngine load_replicas(const ReplicaLoadOptions& opt) {
  if (opt.process_comm && (opt.engine.runner == Runner::Pooling || opt.engine.runner == Runner::Rerank))
    fail("--runner ", runner_name(opt.engine.runner), " runs its --tp / --pp ranks as threads of one process: use "
         "--distributed-executor-backend threads (the default for --runner pooling and rerank)");
  const bool draft_model = opt.engine.scheduler.speculative.method == SpeculativeMethod::DraftModel;
  const bool mtp = opt.engine.scheduler.speculative.method == SpeculativeMethod::Mtp;  // parallel/replicas/mtp_load.h
  const bool eagle3 = opt.engine.scheduler.speculative.method == SpeculativeMethod::Eagle3;  // eagle3_load.h
  if (eagle3) check_eagle3_layout(opt.process_comm != nullptr, opt.layout.pp, opt.layout.dp, opt.pp_virtual_engines);
  if (opt.process_comm) return load_process_rank0(opt);
  const EngineLoadOptions& eo = opt.engine;
  const ParallelLayout& L = opt.layout;
  eo.scheduler.validate();
  if (!kv_dtype_supported(eo.kv_cache_dtype))
      fail("--kv-cache-dtype must be one of ", kKvCacheDtypeHelp, ", got ", dtype_name(eo.kv_cache_dtype));
  if (eo.threads < 0) fail("--threads must be positive, got ", eo.threads);
  PYPTO_ASSERT(static_cast<int>(L.cores.size()) == L.ranks_per_replica() * L.dp, "layout has ", L.cores.size(),
               " groups for dp ", L.dp, " x pp ", L.pp, " x tp ", L.tp);
  const auto t0 = std::chrono::steady_clock::now();
  const int nr = L.ranks_per_replica();  // pp × tp: rank stage * tp + t
  LoadedEngine out;
  out.tp = L.tp;
  out.dp = L.dp;
  out.pp = L.pp;

  auto ck = Checkpoint::open(eo.model_dir, hf_overrides_for_runner(eo.runner, eo.hf_overrides));
  ModelConfig cfg = ck->config();  // a copy: the checkpoint is released after staging
  check_gdn_prefill(cfg, eo.gdn_prefill);  // before staging: a dense model refuses it at once
  cfg.pooling = resolve_runner(*ck, eo);  // generate, or embed / score (pooling_load.h)
  if (cfg.pooling.pooling() && opt.pp_virtual_engines) fail("--pp-virtual-engines does not apply to --runner pooling");
  check_max_model_len(cfg, eo.scheduler.max_model_len);
  check_speculative_target(eo.scheduler.speculative, cfg, eo.model_dir);  // hybrid / pooling / draft checks
  if (eo.weight_dtype && ck->find("model.embed_tokens.weight") &&
      ck->get("model.embed_tokens.weight").info->dtype != *eo.weight_dtype)
    fail("--dtype asks for ", dtype_name(*eo.weight_dtype), " weights but the checkpoint's are ",
         dtype_name(ck->get("model.embed_tokens.weight").info->dtype),
         " and are used as stored (never converted): leave out --dtype or pass --dtype auto");
  if (cfg.num_key_value_heads % L.tp != 0)
    fail("--tp ", L.tp, " does not divide num_key_value_heads (", cfg.num_key_value_heads,
         "): each rank holds an equal share of the KV heads; use a --tp that divides it");

  auto threads_for = [&](const std::vector<int>& cores) {
    if (eo.threads > 0) return eo.threads;
    return L.pinned ? static_cast<int>(cores.size()) : cpu_count();
  };
  auto backend_for = [&](int replica, int rank) {
    const std::vector<int>& cores = L.rank_cores(replica, rank);
    return make_cpu_backend(threads_for(cores), L.pinned ? cores : std::vector<int>{}, eo.matmul_precision,
                            eo.cpu_linear_kernel);
  };

  // Every rank of every replica gets its own backend (threads pinned to its cores). Staging uses
  // a separate unpinned backend: a pool pins the thread that first calls it, and that must be the
  // rank's own thread (the engine loop for rank 0), not this start-up thread. The packed layout
  // depends on the ISA and the matmul precision (bf16-dot panels or plain rows), so the stager
  // takes the run's precision; then its slices fit every rank.
  std::vector<std::vector<std::unique_ptr<Backend>>> backends(size_t(L.dp));
  for (int i = 0; i < L.dp; ++i)
    for (int r = 0; r < nr; ++r) backends[size_t(i)].push_back(backend_for(i, r));
  out.backend_name = backends[0][0]->name();
  log_info("CPU matrix kernels: ", describe_cpu_linear_choice(), "; running ", out.backend_name);
  out.threads = threads_for(L.rank_cores(0, 0));
  // The stager packs in the ranks' layout, which depends on the precision (pair panels or plain rows).
  auto stager = make_cpu_backend(cpu_count(), {}, eo.matmul_precision, eo.cpu_linear_kernel);
  const StagedFormats formats = staged_formats_for(*ck, eo);
  if (formats.layers != WeightFormat::Float)
    log_info("weights: ", formats.describe(), "; ", quantized_activations(formats.layers, *backends[0][0]));
  const bool reuse = !eo.reuse_weights.empty();
  if (reuse) {
    PYPTO_ASSERT(int(eo.reuse_weights.size()) == nr, "reuse_weights has ", eo.reuse_weights.size(), " slices for ", nr, " ranks");
    PYPTO_ASSERT(!mtp || eo.reuse_weights[0]->mtp.present, "reuse_weights were staged without the MTP head");
  } else {
    check_weights_fit(*ck, *stager, L.tp, available_memory_bytes(), &formats);
  }
  if (eo.kv_cache_memory) {  // a given pool too small for one sequence fails before staging too
    KvCapacityRequest kr;
    // At least one layer's worth, as the pool below is sized: a hybrid cut to GDN layers only
    // (make-test-model --layers 1) has no KV layer but still gets a (small) pool.
    kr.bytes_per_block = kv_bytes_per_block(std::max<int32_t>(1, cfg.num_full_attention_layers()), eo.cache.block_size,
                                            cfg.num_key_value_heads, cfg.head_dim, eo.kv_cache_dtype);
    kr.block_size = eo.cache.block_size;
    kr.max_model_len = eo.scheduler.max_model_len;
    kr.kv_cache_memory = eo.kv_cache_memory;
    plan_kv_capacity(kr);
  }
  // Pipeline stages: layer ranges balanced by staged bytes (one stage: every layer).
  const std::vector<LayerRange> stages = plan_pipeline_stages(*ck, *stager, L.tp, L.pp, &formats);
  if (L.pp > 1) {
    std::string s;
    for (int k = 0; k < L.pp; ++k) s += str_cat(k ? ", " : "", "stage ", k, ": layers ", stages[size_t(k)].begin, "-", stages[size_t(k)].end - 1);
    log_info("pipeline: ", s);
  }
  // Hybrid models with prefix caching: snapshots of the Gated DeltaNet state where cached
  // prefixes end (engine/state_snapshots.h), as many as the cache config asks, else one per
  // running sequence (at least 4): each costs what a running sequence's state does.
  const int32_t snapshots = hybrid_state_snapshots(cfg, eo);
  // --pp-virtual-engines: the engines of a replica share its stages' models, so each stage's
  // Gated DeltaNet state pool holds every engine's slots and snapshots (VirtualEngineShare).
  const int32_t engines = opt.pp_virtual_engines ? L.pp : 1;
  std::vector<Qwen3Weights> staged;  // per rank of a replica
  staged.reserve(size_t(nr));
  for (int r = 0; r < nr && reuse; ++r) {  // a copy shares the slabs; only the state pool sizes are this engine's
    Qwen3Weights w = *eo.reuse_weights[size_t(r)];
    set_hybrid_state_pool(w, eo, engines);
    staged.push_back(std::move(w));
  }
  for (int r = 0; r < nr && !reuse; ++r) {
    const StagePosition pos = StagePosition::of_rank(r, L.pp, L.tp);
    StagingOptions so;
    so.tp_rank = pos.tp_rank;
    so.tp_size = L.tp;
    so.layer_begin = stages[size_t(pos.stage)].begin;
    so.layer_end = stages[size_t(pos.stage)].end;
    so.show_progress = eo.show_progress;
    so.compile_cache_dir = eo.compile_cache_dir;  // --use-compile-cache: slabs keyed by TP rank too
    so.quantization = eo.quantization;
    so.expert_parallel = eo.expert_parallel;
    so.int4_group = eo.int4_group;
    so.mtp = mtp && pos.stage == L.pp - 1;  // the MTP head rides with the last stage's weights
    Qwen3Weights w = stage_qwen3_weights(*ck, *stager, so);
    set_hybrid_state_pool(w, eo, engines);
    staged.push_back(std::move(w));
  }
  if (!reuse) attach_pooling_heads(staged, cfg.pooling, eo.model_dir, *stager);  // after all: the head rows may be on any rank
  std::vector<std::shared_ptr<const Qwen3Weights>> slices;
  for (Qwen3Weights& w : staged) {
    slices.push_back(std::make_shared<const Qwen3Weights>(std::move(w)));
    out.weight_bytes += slices.back()->resident_bytes;
  }
  out.weights = slices;
  staged.clear();
  ck.reset();  // everything lives in the staged slabs now
  // The draft model (speculative decoding) is staged by the same stager, before the KV pool is
  // planned from the memory left.
  std::shared_ptr<const Qwen3Weights> draft;
  if (draft_model) {
    draft = stage_draft_weights(eo.scheduler.speculative, eo, *stager);
    out.weight_bytes += draft->resident_bytes;
  }
  std::shared_ptr<const Eagle3Weights> eagle3_head;  // packed by the stager in the ranks' layout
  if (eagle3) {
    eagle3_head = load_eagle3_weights(read_eagle3_config(eo.scheduler.speculative.draft_model), cfg, *stager);
    out.weight_bytes += eagle3_head->bytes;
    log_info("speculative decoding: EAGLE-3 head ", eo.scheduler.speculative.draft_model, " (aux layers ",
             eagle3_head->aux_layers[0], ", ", eagle3_head->aux_layers[1], ", ", eagle3_head->aux_layers[2],
             "; draft vocabulary ", eagle3_head->config.draft_vocab_size, ")");
  }
  stager.reset();
  out.config = slices[0]->config;
  out.config.pooling = cfg.pooling;
  out.load_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // KV blocks: one block id covers the same token slots on every rank, each rank holding its own
  // KV heads, so a replica's block costs the sum over its ranks.
  // Under PP each rank holds its stage's layers only.
  // Hybrid models (Qwen3.5) keep K/V for their full-attention layers only, and a fixed-size
  // Gated DeltaNet state per running sequence (--max-num-seqs of them), taken from the memory
  // before the KV pool is sized.
  int64_t bytes_per_block = 0;
  for (int r = 0; r < nr; ++r) {
    const Qwen3Weights& sw = *slices[size_t(r)];
    int32_t kv_layers = int32_t(sw.layers.size());
    if (cfg.hybrid()) {
      kv_layers = 0;
      for (const Qwen3LayerWeights& l : sw.layers) kv_layers += l.mixer != LayerMixer::GatedDeltaNet;
      kv_layers = std::max<int32_t>(1, kv_layers);
    }
    bytes_per_block += kv_bytes_per_block(kv_layers, eo.cache.block_size, sw.n_kv_heads, cfg.head_dim, eo.kv_cache_dtype);
  }
  if (draft) bytes_per_block += draft_kv_bytes_per_block(*draft, eo);  // the draft's KV block beside each target block
  if (mtp) bytes_per_block += mtp_kv_bytes_per_block(slices, eo);  // the MTP layer's KV block beside it (every TP rank's share)
  if (eagle3_head) bytes_per_block += eagle3_kv_bytes_per_block(*eagle3_head, eo);  // the head's layer beside it
  const int64_t state_bytes = hybrid_state_bytes(cfg, eo, engines) * L.dp;
  out.capacity = plan_kv_capacity(kv_capacity_request(
      eo, bytes_per_block, (static_cast<int64_t>(available_memory_bytes()) - state_bytes) / L.dp, engines));

  EngineConfig ec;
  ec.scheduler = eo.scheduler;
  ec.cache = eo.cache;
  if (cfg.hybrid()) {
    // A cached prefix's KV blocks do not carry the Gated DeltaNet state at their end: a hit
    // resumes only where a state snapshot was taken (engine/state_snapshots.h).
    ec.cache.recurrent_state = true;
    ec.cache.state_snapshots = snapshots;
  }
  ec.cache.num_blocks = static_cast<int32_t>(out.capacity.num_blocks);
  ec.vocab_size = cfg.vocab_size;
  ec.eos_token_ids = cfg.eos_token_ids;
  if (cfg.pooling.pooling()) ec.pooled_width = slices[0]->pooling.width(cfg.vocab_size, cfg.hidden_size);
  // The draft (weights shared, read only) runs unsharded on each replica's rank-0 backend (the
  // engine thread's pool) between the target's steps, with a KV pool of its own per replica.
  // Under --tp / --pp the other ranks' threads idle while it drafts. Under --pp-virtual-engines
  // each engine has its own drafter and KV pool (1/pp of the blocks' share, like its target
  // blocks) on stage 0's rank-0 pool, its passes run by the pipeline thread (draft_load.h).

  // --pp-virtual-engines: each replica runs pp engines over its stages (step_pipeline.h), each
  // with 1/pp of its KV blocks.
  const int64_t per_engine = opt.pp_virtual_engines ? out.capacity.num_blocks / L.pp : out.capacity.num_blocks;
  if (opt.pp_virtual_engines) {
    const int64_t per_seq = (eo.scheduler.max_model_len + eo.cache.block_size - 1) / eo.cache.block_size;
    if (per_engine < per_seq)
      fail("--pp-virtual-engines: each of the ", L.pp, " engines gets ", per_engine, " of the ", out.capacity.num_blocks,
           " KV blocks, fewer than one --max-model-len ", eo.scheduler.max_model_len, " sequence needs (", per_seq,
           "): raise --kv-cache-memory or lower --max-model-len");
  }
  // The placement report: a line per replica, naming each rank's device and cores.
  auto rank_device = [&](int i, int r) {  // " device D cores C" of rank r of replica i
    return str_cat(" device ", L.devices[size_t(i * nr + r)], " cores ",
                   L.pinned ? format_core_list(L.rank_cores(i, r)) : std::string("any"));
  };
  auto rank_places = [&](int i) {  // " [stage s] rank t device D cores C" for each rank of replica i
    std::string places;
    for (int r = 0; r < nr; ++r)
      places += str_cat(L.pp > 1 ? str_cat(" stage ", r / L.tp) : std::string(), " rank ", r % L.tp, rank_device(i, r));
    return places;
  };
  auto add_placement = [&](const std::string& line) { out.placement += (out.placement.empty() ? "" : "\n") + line; };
  std::vector<ReplicaSet::Replica> replicas;
  for (int i = 0; i < L.dp; ++i) {
    std::vector<std::unique_ptr<Communicator>> world;  // pp > 1: every rank of the replica
    if (L.pp > 1) world = make_shm_communicators(nr);
    std::vector<TpRankParts> parts;
    for (int s = 0; s < L.pp; ++s) {
      std::vector<std::unique_ptr<Communicator>> comms;  // the stage's TP group
      if (L.tp > 1) comms = make_shm_communicators(L.tp);
      for (int t = 0; t < L.tp; ++t) {
        const int r = s * L.tp + t;
        TpRankParts p;
        p.backend = std::move(backends[size_t(i)][size_t(r)]);
        p.weights = slices[size_t(r)];
        if (L.tp > 1) p.comm = std::move(comms[size_t(t)]);
        if (L.pp > 1) p.world = std::move(world[size_t(r)]);
        parts.push_back(std::move(p));
      }
    }
    if (opt.pp_virtual_engines) {
      // With MTP each engine has its own drafter and stretch of the last stage's MTP pool
      // (mtp_virtual_engines.h); with EAGLE-3 its own drafter and head KV pool, the steps bringing
      // back the aux rows (eagle3_virtual_engines.h).
      const int64_t mtp_blocks = mtp ? mtp_kv_blocks(per_engine, eo) : 0;
      if (eagle3) check_eagle3_virtual_engines(*eagle3_head, L.tp);
      auto pipeline = make_threaded_step_pipeline(std::move(parts), L.pp, out.capacity.num_blocks, eo.cache.block_size,
                                                  eo.kv_cache_dtype, L.dp > 1 ? str_cat("replica ", i, " ") : "",
                                                  mtp_blocks * L.pp, eagle3 ? eagle3_head->aux_layers : std::vector<int32_t>{});
      if (eo.prefault_kv_cache) pipeline->prefault_kv_cache();  // rank 0's; the stage threads' map as used
      EngineConfig ve = ec;
      ve.cache.num_blocks = static_cast<int32_t>(per_engine);
      for (int g = 0; g < L.pp; ++g) {
        const VirtualEngineShare share = virtual_engine_share(cfg, eo, g, per_engine);
        EngineConfig vg = ve;
        std::unique_ptr<ModelExecutor> exec =
            mtp    ? make_mtp_virtual_engine_executor(pipeline, share, eo.cache.block_size, cfg, g, mtp_blocks, &vg.drafter)
            : eagle3 ? make_eagle3_virtual_engine_executor(pipeline, share, eagle3_head, mtp_kv_blocks(per_engine, eo),
                                                         eo.cache.block_size, eo.kv_cache_dtype, &vg.drafter)
                     : std::make_unique<VirtualEngineExecutor>(pipeline, share, eo.cache.block_size);
        if (draft) vg.drafter = make_pipelined_draft_proposer(draft, pipeline, eo, per_engine);
        add_engine(out, replicas, vg, std::move(exec));
      }
      add_placement(str_cat("replica ", i, ": ", L.pp, " virtual engines of ",
                               per_engine, " KV blocks over ", nr, " rank threads, their steps in flight together",
                               mtp ? str_cat("; each engine's MTP drafter's passes on the ", L.tp, " rank",
                                             L.tp > 1 ? "s" : "", " of the last stage")
                               : draft ? std::string("; each engine's draft model on stage 0's rank 0, between the steps")
                               : eagle3 ? std::string("; each engine's EAGLE-3 drafter on stage 0's rank 0, between the steps")
                                   : std::string()));
      continue;
    }
    if (eagle3 && nr > 1) {  // --tp / --pp (threads): the aux rows from the stages holding them, the head on rank 0
      EngineConfig me = ec;
      auto exec = make_eagle3_tp_executor(std::move(parts), L.pp, opt.pp_micro_batches, eagle3_head,
                                          out.capacity.num_blocks, eo, L.dp > 1 ? str_cat("replica ", i, " ") : "",
                                          &me.drafter);
      add_engine(out, replicas, me, std::move(exec));
      add_placement(str_cat("replica ", i, ": the EAGLE-3 drafter on rank 0:", rank_places(i)));
      continue;
    }
    if (eagle3) {  // one rank per replica: the target with its aux states for the head
      EngineConfig me = ec;
      auto exec = make_eagle3_executor(parts[0].weights, eagle3_head, std::move(parts[0].backend), out.capacity.num_blocks,
                                       eo, &me.drafter);
      add_engine(out, replicas, me, std::move(exec));
      add_placement(str_cat("replica ", i, ": one rank with the EAGLE-3 drafter,", rank_device(i, 0)));
      continue;
    }
    if (mtp && nr == 1) {  // one rank per replica: the target with its hidden states for the MTP drafter
      EngineConfig me = ec;  // each replica: its own executor, MTP KV pool and drafter over the shared weights
      auto exec = make_mtp_executor(parts[0].weights, std::move(parts[0].backend), out.capacity.num_blocks, eo, &me.drafter);
      add_engine(out, replicas, me, std::move(exec));
      add_placement(str_cat("replica ", i, ": one rank with the MTP drafter,", rank_device(i, 0)));
      continue;
    }
    if (mtp) {  // --tp / --pp (threads): the MTP head sharded over the last stage's TP ranks
      EngineConfig me = ec;
      auto exec = make_mtp_tp_executor(std::move(parts), L.pp, opt.pp_micro_batches, out.capacity.num_blocks, eo,
                                       L.dp > 1 ? str_cat("replica ", i, " ") : "", &me.drafter);
      add_engine(out, replicas, me, std::move(exec));
      const std::string line = str_cat("replica ", i, ": the MTP drafter sharded over ", L.tp, " TP rank",
                                 L.tp > 1 ? "s" : "", L.pp > 1 ? str_cat(" of stage ", L.pp - 1) : std::string(), ":");
      add_placement(line + rank_places(i));
      continue;
    }
    EngineConfig rc = ec;
    if (draft) rc.drafter = make_draft_proposer(draft, *parts[0].backend, eo, out.capacity.num_blocks);
    auto runner = std::make_unique<TpModelRunner>(std::move(parts), out.capacity.num_blocks, eo.cache.block_size,
                                                  eo.kv_cache_dtype, L.dp > 1 ? str_cat("replica ", i, " ") : "", L.pp,
                                                  opt.pp_micro_batches);
    if (eo.prefault_kv_cache) runner->prefault_kv_caches();
    add_engine(out, replicas, rc, std::move(runner));

    add_placement(str_cat("replica ", i, ":", rank_places(i)));
  }
  out.capacity.num_blocks = per_engine;  // of one engine
  out.replicas = std::make_shared<ReplicaSet>(std::move(replicas), router_options(opt, out.capacity.num_blocks));
  return out;
}

LoadedEngine load_engine(const EngineLoadOptions& opt) {
  ReplicaLoadOptions r;
  r.engine = opt;
  r.layout.devices = {0};
  r.layout.pinned = !opt.cores.empty();
  r.layout.cores = {opt.cores.empty() ? available_cores() : opt.cores};
  return load_replicas(r);
}

}  // namespace pypto
