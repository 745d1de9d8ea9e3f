#pragma once
// What a checkpoint is served as, in vLLM's terms: the runner (--runner generate | pooling) and,
// for a pooling model, its task. Qwen3-Embedding and Qwen3-Reranker both say Qwen3ForCausalLM in
// config.json, so the task comes from the other files of the directory or from the command line:
//  - Embed: Qwen3-Embedding as published (flat tensor names without `model.`, no lm_head,
//    sentence-transformers files: modules.json, 1_Pooling/config.json with last-token pooling,
//    config_sentence_transformers.json prompts). Output: the final-normed hidden state of the last
//    token, L2-normalised (when modules.json lists Normalize, or has no sentence-transformers files).
//  - Score: the original Qwen3-Reranker, a causal LM turned into a one-logit classifier by vLLM's
//    --hf-overrides {"architectures": ["Qwen3ForSequenceClassification"], "classifier_from_token":
//    ["no", "yes"], "is_original_qwen3_reranker": true} (or our shorter --runner rerank). Output:
//    the logits of those two tokens at the last position; score = sigmoid(logit_yes - logit_no).
#include <map>
#include <string>
#include <vector>

#include "io/json_fields.h"

namespace pypto {

enum class PoolingTask { None, Embed, Score };
// --runner: auto picks pooling for an embedding checkpoint (or a sequence-classification config)
// and generate otherwise; rerank is pooling with the Qwen3-Reranker overrides (see above).
enum class Runner { Auto, Generate, Pooling, Rerank };

struct PoolingConfig {
  PoolingTask task = PoolingTask::None;
  bool normalize = true;  // Embed: L2-normalise (sentence-transformers' Normalize module)
  // Score: the tokens whose head rows give the two logits, in vLLM's order [false, true] (["no",
  // "yes"] for Qwen3-Reranker): score = sigmoid(logit[1] - logit[0]).
  std::vector<std::string> classifier_from_token;
  // config_sentence_transformers.json "prompts" (e.g. query -> "Instruct: ...\nQuery:").
  std::map<std::string, std::string> prompts;

  bool pooling() const { return task != PoolingTask::None; }
};

const char* pooling_task_name(PoolingTask t);  // "generate" (None), "embed", "score"
// "auto" | "generate" | "pooling" | "rerank"; anything else is an Error naming the allowed values.
Runner parse_runner(const std::string& s);
const char* runner_name(Runner r);

// The --hf-overrides JSON that --runner rerank stands for (vLLM's documented form).
extern const char* const kQwen3RerankerOverrides;

// --runner rerank merged into --hf-overrides: the override keys of kQwen3RerankerOverrides added
// to `hf_overrides` (a JSON object or ""). Other runners return it unchanged.
std::string hf_overrides_for_runner(Runner r, const std::string& hf_overrides);

// Reads config.json's sequence-classification keys (the architecture Qwen3ForSequenceClassification
// given through --hf-overrides): classifier_from_token and is_original_qwen3_reranker. A
// seq-cls checkpoint with its own score head is refused by name. Sets c.pooling (task Score).
struct ModelConfig;
void parse_sequence_classification(const JsonFields& f, ModelConfig& c);

// The pooling configuration of checkpoint directory `dir` under runner `r`: reads modules.json,
// 1_Pooling/config.json and config_sentence_transformers.json when present. `headless`: the
// checkpoint has flat tensor names and no lm_head (an embedding model). Throws Error naming the
// file or flag: an unsupported pooling mode, generate on a headless checkpoint, rerank on one.
PoolingConfig resolve_pooling(const std::string& dir, const ModelConfig& c, bool headless, Runner r);

}  // namespace pypto
