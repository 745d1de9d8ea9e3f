#include "parallel/replicas/pooling_load.h"

#include "core/error.h"
#include "core/log.h"
#include "tokenizer/tokenizer.h"

namespace pypto {

PoolingConfig resolve_runner(const Checkpoint& ck, const EngineLoadOptions& eo, int tp, int pp) {
  PoolingConfig p = resolve_pooling(ck.dir(), ck.config(), ck.headless(), eo.runner);
  if (!p.pooling()) return p;
  if (tp > 1 || pp > 1)
    fail("--runner pooling (", pooling_task_name(p.task), " model ", ck.dir(),
         ") runs on one rank per replica: leave out --tp and --pp (--dp replicates it)");
  log_info("runner pooling: task ", pooling_task_name(p.task),
           p.task == PoolingTask::Embed ? str_cat(", last-token pooling", p.normalize ? ", L2-normalised" : "")
                                        : str_cat(", score = sigmoid(logit '", p.classifier_from_token[1], "' - logit '",
                                                  p.classifier_from_token[0], "')"));
  return p;
}

void attach_pooling_head(Qwen3Weights& w, const PoolingConfig& p, const std::string& model_dir, Backend& backend) {
  if (p.task == PoolingTask::None) return;
  if (p.task == PoolingTask::Embed) {
    w.pooling.kind = PoolingHead::Kind::Hidden;
    return;
  }
  PYPTO_ASSERT(w.has_head && w.vocab_begin == 0 && w.vocab_rows == w.config.vocab_size, "score head on a vocabulary slice");
  const auto tok = Tokenizer::load(model_dir);
  PoolingHead& h = w.pooling;
  h.kind = PoolingHead::Kind::TokenLogits;
  for (const std::string& t : p.classifier_from_token) {
    const std::optional<int32_t> id = tok->token_to_id(t);
    if (!id) fail(model_dir, ": classifier_from_token '", t, "' is not a token of the checkpoint's tokenizer");
    if (*id >= w.config.vocab_size)
      fail(model_dir, ": classifier_from_token '", t, "' is token ", *id, ", outside the model's vocabulary of ",
           w.config.vocab_size);
    h.token_ids.push_back(*id);
  }
  const int64_t H = w.config.hidden_size;
  h.rows.resize(size_t(int64_t(h.token_ids.size()) * H));
  backend.weight_rows(h.token_ids.data(), int64_t(h.token_ids.size()), w.lm_head, h.rows.data());
  backend.synchronize();
  log_info("score head: lm_head rows ", h.token_ids[0], " ('", p.classifier_from_token[0], "') and ", h.token_ids[1],
           " ('", p.classifier_from_token[1], "')");
}

}  // namespace pypto
