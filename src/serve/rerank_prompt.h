#pragma once
// Qwen3-Reranker's published prompt (the Qwen3-Embedding repository's transformers example and
// technical report), token by token:
//   prefix = "<|im_start|>system\nJudge whether the Document meets the requirements based on the
//             Query and the Instruct provided. Note that the answer can only be \"yes\" or
//             \"no\".<|im_end|>\n<|im_start|>user\n"
//   middle = "<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}"
//   suffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
// Each part is tokenized on its own (special tokens written in the query or document are read as
// special tokens, as Hugging Face does); the middle is cut at its end so that the whole fits
// max_len, and the suffix is always present. The score is then sigmoid(logit('yes') -
// logit('no')) at the last position.
#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pypto {

// The instruction when a request gives none (the model card's).
extern const char* const kQwen3RerankDefaultInstruction;

// The prompt's token ids; Error when max_len cannot hold the prefix, the suffix and one token
// of the middle (the message names the limit as `limit_name`).
std::vector<int32_t> qwen3_rerank_prompt(const Tokenizer& tok, const std::string& instruction,
                                         const std::string& query, const std::string& document, int64_t max_len,
                                         const char* limit_name = "--max-model-len");

// sigmoid(logit_true - logit_false) from the score head's row [logit_false, logit_true] (the
// order of classifier_from_token, ["no", "yes"]), computed in double.
double qwen3_rerank_score(const std::vector<float>& row);
// The raw log-odds logit_true - logit_false (use_activation false), in double.
double qwen3_rerank_logit(const std::vector<float>& row);

}  // namespace pypto
