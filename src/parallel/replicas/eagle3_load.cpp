#include "parallel/replicas/eagle3_load.h"

#include "core/error.h"
#include "engine/eagle3_executor.h"
#include "engine/kv_capacity.h"
#include "parallel/replicas/eagle3_tp_executor.h"
#include "parallel/replicas/mtp_load.h"

namespace pypto {

void check_eagle3_layout(bool rank_processes, int pp, int dp, bool pp_virtual_engines) {
  if (!rank_processes) return;
  const char* what = pp > 1 ? "--pp > 1" : dp > 1 ? "--dp > 1" : pp_virtual_engines ? "--pp-virtual-engines" : nullptr;
  if (what)
    fail("--speculative-config: method eagle3 with rank processes (--distributed-executor-backend mp / mpi) runs "
         "--tp only; ", what, " is not supported with them (it is with --distributed-executor-backend threads)");
}

int64_t eagle3_kv_bytes_per_block(const Eagle3Weights& head, const EngineLoadOptions& eo) {
  return kv_bytes_per_block(1, eo.cache.block_size, head.config.num_key_value_heads, head.config.head_dim,
                            eo.kv_cache_dtype);
}

std::unique_ptr<ModelExecutor> make_eagle3_executor(std::shared_ptr<const Qwen3Weights> target,
                                                    std::shared_ptr<const Eagle3Weights> head_w,
                                                    std::unique_ptr<Backend> backend, int64_t num_blocks,
                                                    const EngineLoadOptions& eo, std::shared_ptr<DraftProposer>* drafter) {
  std::shared_ptr<Backend> be(std::move(backend));
  auto model = std::make_shared<Qwen3Model>(*target, *be);
  auto cache = std::make_shared<KvCache>(model->kv_cache_spec(num_blocks, eo.cache.block_size, eo.kv_cache_dtype));
  if (eo.prefault_kv_cache) cache->prefault();
  auto head = std::make_shared<Eagle3Head>(head_w, *target, *be);
  // The head's rows live in the target's block ids plus private lookahead blocks (as MTP's).
  auto head_cache =
      std::make_shared<KvCache>(head->kv_cache_spec(mtp_kv_blocks(num_blocks, eo), eo.cache.block_size, eo.kv_cache_dtype));
  auto proposer = make_eagle3_proposer(target->config, *head, *head_cache);
  proposer->keep_alive({std::shared_ptr<const void>(target), std::shared_ptr<const void>(be),
                        std::shared_ptr<const void>(head_w), std::shared_ptr<const void>(head),
                        std::shared_ptr<const void>(head_cache)});
  auto exec = std::make_unique<Eagle3Executor>(*model, *cache, *head, proposer);
  exec->keep_alive({std::shared_ptr<const void>(target), std::shared_ptr<const void>(be),
                    std::shared_ptr<const void>(model), std::shared_ptr<const void>(cache),
                    std::shared_ptr<const void>(head_w), std::shared_ptr<const void>(head),
                    std::shared_ptr<const void>(head_cache)});
  *drafter = proposer;
  return exec;
}

std::unique_ptr<ModelExecutor> make_eagle3_tp_executor(std::vector<TpRankParts> ranks, int pp, MicroBatchPolicy micro,
                                                       std::shared_ptr<const Eagle3Weights> head, int64_t num_blocks,
                                                       const EngineLoadOptions& eo, const std::string& track_prefix,
                                                       std::shared_ptr<DraftProposer>* drafter) {
  auto runner = std::make_unique<TpModelRunner>(std::move(ranks), num_blocks, eo.cache.block_size, eo.kv_cache_dtype,
                                                track_prefix, pp, micro);
  if (eo.prefault_kv_cache) runner->prefault_kv_caches();
  auto exec = std::make_unique<Eagle3TpExecutor>(std::move(runner), std::move(head), mtp_kv_blocks(num_blocks, eo),
                                                 eo.cache.block_size, eo.kv_cache_dtype);
  *drafter = exec->proposer();
  return exec;
}

}  // namespace pypto
