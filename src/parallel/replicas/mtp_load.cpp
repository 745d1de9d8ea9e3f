#include "parallel/replicas/mtp_load.h"

#include "core/error.h"
#include "engine/kv_capacity.h"
#include "engine/mtp_executor.h"
#include "engine/mtp_proposer.h"

namespace pypto {

void check_mtp_layout(int tp, int pp, bool process_comm) {
  if (tp > 1 || pp > 1)
    fail("--speculative-config: method mtp runs the target on one rank per replica so far (the MTP head is not ",
         "sharded across --tp ranks or --pp stages): leave out --tp and --pp (got --tp ", tp, " --pp ", pp,
         "; --dp works), or use {\"method\": \"ngram\", ...}, which works with them");
  if (process_comm)
    fail("--speculative-config: method mtp runs its --dp replicas as threads of one process: use "
         "--distributed-executor-backend threads (the default for --dp)");
}

int64_t mtp_kv_bytes_per_block(const Qwen3Weights& target, const EngineLoadOptions& eo) {
  return kv_bytes_per_block(1, eo.cache.block_size, target.n_kv_heads, target.config.head_dim, eo.kv_cache_dtype);
}

std::unique_ptr<ModelExecutor> make_mtp_executor(std::shared_ptr<const Qwen3Weights> target,
                                                 std::unique_ptr<Backend> backend, int64_t num_blocks,
                                                 const EngineLoadOptions& eo, std::shared_ptr<DraftProposer>* drafter) {
  std::shared_ptr<Backend> be(std::move(backend));
  auto model = std::make_shared<Qwen3Model>(*target, *be);
  auto cache = std::make_shared<KvCache>(model->kv_cache_spec(num_blocks, eo.cache.block_size, eo.kv_cache_dtype));
  if (eo.prefault_kv_cache) cache->prefault();
  // The MTP holds at most what the target holds of a request, plus its k - 1 lookahead rows.
  const int32_t bs = eo.cache.block_size;
  const int64_t k = eo.scheduler.speculative.num_speculative_tokens;
  const int64_t blocks = num_blocks + int64_t(eo.scheduler.max_num_seqs) * ((k + bs - 1) / bs + 1);
  auto mtp = std::make_shared<MtpProposer>(*target, *be, blocks, bs, eo.kv_cache_dtype);
  mtp->keep_alive({std::shared_ptr<const void>(target), std::shared_ptr<const void>(be)});
  auto exec = std::make_unique<MtpExecutor>(*model, *cache, mtp);
  exec->keep_alive({std::shared_ptr<const void>(target), std::shared_ptr<const void>(be),
                   std::shared_ptr<const void>(model), std::shared_ptr<const void>(cache)});
  *drafter = mtp;
  return exec;
}

}  // namespace pypto
