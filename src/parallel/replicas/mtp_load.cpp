#include "parallel/replicas/mtp_load.h"

#include "core/error.h"
#include "engine/kv_capacity.h"
#include "engine/mtp_executor.h"
#include "engine/mtp_proposer.h"
#include "parallel/replicas/mtp_tp_executor.h"

namespace pypto {

int64_t mtp_kv_bytes_per_block(const std::vector<std::shared_ptr<const Qwen3Weights>>& ranks,
                               const EngineLoadOptions& eo) {
  int64_t bytes = 0;
  for (const auto& w : ranks)
    if (w->has_head)
      bytes += kv_bytes_per_block(1, eo.cache.block_size, w->n_kv_heads, w->config.head_dim, eo.kv_cache_dtype);
  return bytes;
}

int64_t drafter_kept_hidden_bytes(const SpeculativeConfig& spec) {
  const bool hidden_drafter = spec.method == SpeculativeMethod::Mtp || spec.method == SpeculativeMethod::Eagle3;
  return hidden_drafter && spec.cost_model ? MtpProposer::kKeptHiddenBytes : 0;
}

// The MTP holds at most what the target holds of a request, plus its k - 1 lookahead rows.
int64_t mtp_kv_blocks(int64_t target_blocks, const EngineLoadOptions& eo) {
  const int32_t bs = eo.cache.block_size;
  const int64_t k = eo.scheduler.speculative.num_speculative_tokens;
  return target_blocks + int64_t(eo.scheduler.max_num_seqs) * ((k + bs - 1) / bs + 1);
}

std::unique_ptr<ModelExecutor> make_mtp_executor(std::shared_ptr<const Qwen3Weights> target,
                                                 std::unique_ptr<Backend> backend, int64_t num_blocks,
                                                 const EngineLoadOptions& eo, std::shared_ptr<DraftProposer>* drafter) {
  std::shared_ptr<Backend> be(std::move(backend));
  auto model = std::make_shared<Qwen3Model>(*target, *be);
  auto cache = std::make_shared<KvCache>(model->kv_cache_spec(num_blocks, eo.cache.block_size, eo.kv_cache_dtype));
  if (eo.prefault_kv_cache) cache->prefault();
  auto mtp = std::make_shared<MtpProposer>(*target, *be, mtp_kv_blocks(num_blocks, eo), eo.cache.block_size,
                                           eo.kv_cache_dtype);
  mtp->keep_alive({std::shared_ptr<const void>(target), std::shared_ptr<const void>(be)});
  auto exec = std::make_unique<MtpExecutor>(*model, *cache, mtp);
  exec->keep_alive({std::shared_ptr<const void>(target), std::shared_ptr<const void>(be),
                   std::shared_ptr<const void>(model), std::shared_ptr<const void>(cache)});
  *drafter = mtp;
  return exec;
}

std::unique_ptr<ModelExecutor> make_mtp_tp_executor(std::vector<TpRankParts> ranks, int pp, MicroBatchPolicy micro,
                                                    int64_t num_blocks, const EngineLoadOptions& eo,
                                                    const std::string& track_prefix,
                                                    std::shared_ptr<DraftProposer>* drafter) {
  auto runner = std::make_unique<TpModelRunner>(std::move(ranks), num_blocks, eo.cache.block_size, eo.kv_cache_dtype,
                                                track_prefix, pp, micro);
  if (eo.prefault_kv_cache) runner->prefault_kv_caches();
  auto exec = std::make_unique<MtpTpExecutor>(std::move(runner), mtp_kv_blocks(num_blocks, eo), eo.cache.block_size,
                                              eo.kv_cache_dtype);
  *drafter = exec->mtp_proposer();
  return exec;
}

}  // namespace pypto
