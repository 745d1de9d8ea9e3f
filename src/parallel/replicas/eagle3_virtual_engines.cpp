#include "parallel/replicas/eagle3_virtual_engines.h"

#include "core/error.h"
#include "engine/mtp_proposer.h"
#include "model/mtp_head.h"

namespace pypto {

void check_eagle3_virtual_engines(const Eagle3Weights& head, int tp) {
  if (tp > 1 && !head.own_embed)
    fail("--speculative-config: method eagle3 with --pp-virtual-engines and --tp ", tp,
         " needs a head with its own embed_tokens (", head.config.dir,
         " reads the target's, which is split over stage 0's TP ranks there): use --tp 1 or leave out "
         "--pp-virtual-engines");
}

std::unique_ptr<ModelExecutor> make_eagle3_virtual_engine_executor(std::shared_ptr<StepPipeline> pipeline,
                                                                   const VirtualEngineShare& share,
                                                                   std::shared_ptr<const Eagle3Weights> head_w,
                                                                   int64_t head_blocks, int32_t block_size,
                                                                   DType kv_dtype,
                                                                   std::shared_ptr<DraftProposer>* drafter) {
  StepPipeline* p = pipeline.get();
  // The head's lookups run on the pipeline thread (inside run_on_stage0); `ids` is their scratch.
  auto ids = std::make_shared<std::vector<int32_t>>();
  Eagle3Head::EmbeddingLookup lookup = [p, ids](const int32_t* tokens, int64_t T, float* e) {
    MtpHead::lookup_embedding(p->weights(), p->backend(), nullptr, tokens, T, e, *ids);
  };
  auto head = std::make_shared<Eagle3Head>(head_w, lookup, pipeline->backend());
  auto cache = std::make_shared<KvCache>(head->kv_cache_spec(head_blocks, block_size, kv_dtype));
  Eagle3Head* h = head.get();
  KvCache* kv = cache.get();
  // The drafter's passes (as make_eagle3_proposer's) on the pipeline thread, between the steps.
  MtpProposer::RemotePass pass = [p, h, kv](const ForwardBatch& batch, const std::vector<float>& hidden,
                                            std::vector<float>& logits, std::vector<float>& out) {
    p->run_on_stage0([&] {
      if (batch.num_logits() == 0) h->store_kv(batch, hidden.data(), *kv);  // MtpProposer::run_kv
      else h->forward(batch, hidden.data(), *kv, logits.data(), out.data());
    });
  };
  const ModelConfig& config = pipeline->weights().config;
  PYPTO_ASSERT(head->hidden_size() == config.hidden_size, "EAGLE-3 head and target hidden sizes");
  auto mtp = std::make_shared<MtpProposer>(config, std::move(pass), head_blocks, block_size);
  const int64_t H = config.hidden_size, width = int64_t(head_w->aux_layers.size()) * H;
  // fc on the rows a pass reads only (MtpProposer::set_fuse), on the pipeline thread as the passes.
  mtp->set_fuse(width, [p, h](const float* aux, int64_t n, float* fused) {
    p->run_on_stage0([&] { h->fuse(aux, n, fused); });
  });
  // The scheduler holds the drafter: it keeps the pipeline (the pool its passes run on), the head
  // and its KV alive.
  mtp->keep_alive({std::shared_ptr<const void>(pipeline), std::shared_ptr<const void>(head_w),
                   std::shared_ptr<const void>(head), std::shared_ptr<const void>(cache), std::shared_ptr<const void>(ids)});
  auto exec = std::make_unique<VirtualEngineExecutor>(pipeline, share, block_size);
  exec->observe_hidden([mtp](const SchedulerOutput& so, const ForwardBatch& batch,
                               const float* aux) { mtp->observe(so, batch, aux); },
                       width);
  *drafter = std::move(mtp);
  return exec;
}

}  // namespace pypto
