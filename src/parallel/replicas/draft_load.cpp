#include "parallel/replicas/draft_load.h"

#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "engine/draft_model_proposer.h"
#include "engine/kv_capacity.h"
#include "io/checkpoint.h"
#include "model/weight_staging.h"
#include "parallel/replicas/load_replicas.h"
#include "parallel/replicas/step_pipeline.h"

namespace pypto {

std::shared_ptr<const Qwen3Weights> stage_draft_weights(const SpeculativeConfig& spec, const EngineLoadOptions& eo,
                                                        const Backend& stager) {
  auto ck = Checkpoint::open(spec.draft_model, "");
  StagingOptions so;
  so.show_progress = eo.show_progress;
  so.compile_cache_dir = eo.compile_cache_dir;
  so.quantization = parse_quantization(spec.draft_quantization);
  so.int4_group = eo.int4_group;
  const StagedFormats formats = staged_formats(*ck, so.quantization, so.int4_group);
  check_weights_fit(*ck, stager, 1, available_memory_bytes(), &formats);
  auto w = std::make_shared<Qwen3Weights>(stage_qwen3_weights(*ck, stager, so));
  char b[32];
  log_info("speculative decoding: draft ", spec.draft_model, " (", w->config.num_hidden_layers, " layers, ",
           formats.describe(), ", ", format_bytes(w->resident_bytes, b, sizeof b), "), k = ", spec.num_speculative_tokens);
  return w;
}

int64_t draft_kv_bytes_per_block(const Qwen3Weights& draft, const EngineLoadOptions& eo) {
  return kv_bytes_per_block(int32_t(draft.layers.size()), eo.cache.block_size, draft.n_kv_heads, draft.config.head_dim,
                            eo.kv_cache_dtype);
}

std::shared_ptr<DraftModelProposer> make_draft_proposer(std::shared_ptr<const Qwen3Weights> draft, Backend& backend,
                                                        const EngineLoadOptions& eo, int64_t target_blocks) {
  const int32_t bs = eo.cache.block_size;
  const int64_t k = eo.scheduler.speculative.num_speculative_tokens;
  const int64_t blocks = target_blocks + int64_t(eo.scheduler.max_num_seqs) * ((k + bs - 1) / bs + 1);
  // The draft caches prefixes when the target does (its own blocks, the target's block hashes).
  return std::make_shared<DraftModelProposer>(std::move(draft), backend, blocks, bs, eo.kv_cache_dtype,
                                              eo.scheduler.max_num_batched_tokens, eo.cache.enable_prefix_caching);
}

std::shared_ptr<DraftModelProposer> make_draft_proposer(std::shared_ptr<const Qwen3Weights> draft,
                                                        std::unique_ptr<Backend> backend, const EngineLoadOptions& eo,
                                                        int64_t target_blocks) {
  auto d = make_draft_proposer(std::move(draft), *backend, eo, target_blocks);
  d->own_backend(std::move(backend));
  return d;
}

std::shared_ptr<DraftModelProposer> make_pipelined_draft_proposer(std::shared_ptr<const Qwen3Weights> draft,
                                                                  std::shared_ptr<StepPipeline> pipeline,
                                                                  const EngineLoadOptions& eo, int64_t engine_blocks) {
  auto d = make_draft_proposer(std::move(draft), pipeline->backend(), eo, engine_blocks);
  // The drafter's run_on_ holds the pipeline (and so the pool its model runs on) until after its
  // model is gone.
  d->set_run_on([pipeline](const std::function<void()>& pass) { pipeline->run_on_stage0(pass); });
  return d;
}

}  // namespace pypto
