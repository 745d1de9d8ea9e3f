#include "parallel/replicas/pooling_load.h"

#include "core/error.h"
#include "core/log.h"
#include "tokenizer/tokenizer.h"

namespace pypto {

PoolingConfig resolve_runner(const Checkpoint& ck, const EngineLoadOptions& eo) {
  PoolingConfig p = resolve_pooling(ck.dir(), ck.config(), ck.headless(), eo.runner);
  if (!p.pooling()) return p;
  log_info("runner pooling: task ", pooling_task_name(p.task),
           p.task == PoolingTask::Embed ? str_cat(", last-token pooling", p.normalize ? ", L2-normalised" : "")
                                        : str_cat(", score = sigmoid(logit '", p.classifier_from_token[1], "' - logit '",
                                                  p.classifier_from_token[0], "')"));
  return p;
}

void attach_pooling_heads(std::vector<Qwen3Weights>& ws, const PoolingConfig& p, const std::string& model_dir,
                          Backend& backend) {
  if (p.task == PoolingTask::None) return;
  PYPTO_ASSERT(!ws.empty(), "no slices to put a pooling head on");
  if (p.task == PoolingTask::Embed) {
    for (Qwen3Weights& w : ws) w.pooling.kind = PoolingHead::Kind::Hidden;
    return;
  }
  const ModelConfig& cfg = ws[0].config;
  const auto tok = Tokenizer::load(model_dir);
  PoolingHead h;
  h.kind = PoolingHead::Kind::TokenLogits;
  for (const std::string& t : p.classifier_from_token) {
    const std::optional<int32_t> id = tok->token_to_id(t);
    if (!id) fail(model_dir, ": classifier_from_token '", t, "' is not a token of the checkpoint's tokenizer");
    if (*id >= cfg.vocab_size)
      fail(model_dir, ": classifier_from_token '", t, "' is token ", *id, ", outside the model's vocabulary of ",
           cfg.vocab_size);
    h.token_ids.push_back(*id);
  }
  const int64_t H = cfg.hidden_size;
  h.rows.resize(size_t(int64_t(h.token_ids.size()) * H));
  for (size_t k = 0; k < h.token_ids.size(); ++k) {
    const int32_t id = h.token_ids[k];
    const Qwen3Weights* holder = nullptr;
    for (const Qwen3Weights& w : ws)
      if (w.has_head && id >= w.vocab_begin && id < w.vocab_begin + w.vocab_rows) holder = &w;
    PYPTO_ASSERT(holder, "no slice stages lm_head row ", id);
    const int32_t local = int32_t(id - holder->vocab_begin);
    backend.weight_rows(&local, 1, holder->lm_head, h.rows.data() + int64_t(k) * H);
  }
  backend.synchronize();
  for (Qwen3Weights& w : ws) w.pooling = h;
  log_info("score head: lm_head rows ", h.token_ids[0], " ('", p.classifier_from_token[0], "') and ", h.token_ids[1],
           " ('", p.classifier_from_token[1], "')");
}

}  // namespace pypto
