#include "serve/rerank_prompt.h"

#include <cmath>

#include "core/error.h"

namespace pypto {

const char* const kQwen3RerankDefaultInstruction =
    "Given a web search query, retrieve relevant passages that answer the query";

namespace {
const char* const kPrefix =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
    "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n";
const char* const kSuffix = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
}  // namespace

std::vector<int32_t> qwen3_rerank_prompt(const Tokenizer& tok, const std::string& instruction, const std::string& query,
                                         const std::string& document, int64_t max_len, const char* limit_name) {
  std::vector<int32_t> ids = tok.encode(kPrefix);
  const std::vector<int32_t> suffix = tok.encode(kSuffix);
  std::vector<int32_t> middle =
      tok.encode(str_cat("<Instruct>: ", instruction, "\n<Query>: ", query, "\n<Document>: ", document));
  const int64_t room = max_len - int64_t(ids.size()) - int64_t(suffix.size());
  if (room < 1)
    fail(limit_name, " ", max_len, " cannot hold the reranker prompt's ", ids.size() + suffix.size(),
         " fixed tokens and a document");
  if (int64_t(middle.size()) > room) middle.resize(size_t(room));
  ids.insert(ids.end(), middle.begin(), middle.end());
  ids.insert(ids.end(), suffix.begin(), suffix.end());
  return ids;
}

double qwen3_rerank_logit(const std::vector<float>& row) {
  PYPTO_ASSERT(row.size() == 2, "a score row has 2 logits, got ", row.size());
  return double(row[1]) - double(row[0]);
}

double qwen3_rerank_score(const std::vector<float>& row) { return 1.0 / (1.0 + std::exp(-qwen3_rerank_logit(row))); }

}  // namespace pypto
