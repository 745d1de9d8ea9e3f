#include "serve/pooling_inputs.h"

#include "core/error.h"
#include "serve/api_error.h"

namespace pypto {

namespace {
// Matryoshka sizes: 32 up to the hidden size (the Qwen3-Embedding model cards' range).
constexpr int64_t kMinDimensions = 32;
}  // namespace

std::vector<int32_t> pooling_token_ids(const ServerState& s, const EmbeddingInput& in, const PoolingOptions& o,
                                       std::optional<int64_t> keep, const std::string& label, const char* param) {
  const Tokenizer& tok = *s.ctx.tokenizer;
  std::vector<int32_t> ids;
  if (in.is_text) {
    try {
      ids = tok.encode(in.text, o.add_special_tokens);
    } catch (const Error& e) {
      throw invalid_request(str_cat("'", label, "' cannot be tokenized: ", e.what()), param);
    }
    if (ids.empty())  // e.g. add_special_tokens false on text the tokenizer reads as nothing
      throw invalid_request(str_cat("'", label, "' has no tokens"), param);
  } else {
    const int64_t vocab = std::min<int64_t>(tok.vocab_size(), s.ctx.model_config.vocab_size);
    ids = in.token_ids;  // as given: no token is appended to token ids
    for (int32_t id : ids)
      if (id >= vocab) throw invalid_request(str_cat("'", label, "' has token id ", id, ": allowed 0 <= id < ", vocab), param);
  }
  truncate_tokens(ids, keep, o);
  if (int64_t(ids.size()) > s.ctx.max_model_len)
    throw invalid_request(str_cat("'", label, "' is ", ids.size(), " tokens; this model's maximum context length is ",
                                  s.ctx.max_model_len,
                                  " tokens (--max-model-len): reduce the length of the input, or set "
                                  "truncate_prompt_tokens"),
                          param, "context_length_exceeded");
  return ids;
}

void check_input_count(const ServerState& s, size_t n, const char* param) {
  const int64_t max_inputs = int64_t(s.ctx.max_num_seqs) * int64_t(s.ctx.engines->num_engines()) +
                             s.options.max_queued_requests;
  if (int64_t(n) > max_inputs)
    throw invalid_request(str_cat("'", param, "' has ", n, " items; at most ", max_inputs,
                                  " per request (--max-num-seqs x replicas + --max-queued-requests)"),
                          param);
}

void check_dimensions(const ServerState& s, std::optional<int64_t> dimensions) {
  if (!dimensions) return;
  const int64_t hidden = s.ctx.model_config.hidden_size;
  const int64_t lo = std::min(kMinDimensions, hidden);
  if (*dimensions < lo || *dimensions > hidden)
    throw invalid_request(str_cat("'dimensions' is ", *dimensions, "; this model allows ", lo, " to ", hidden,
                                  " (Matryoshka: the first d values, then normalised)"),
                          "dimensions");
}

nlohmann::ordered_json embedding_json(const ServerState& s, const std::vector<float>& pooled, const EmbeddingRequest& r) {
  const bool normalize = r.opts.use_activation.value_or(s.ctx.model_config.pooling.normalize);
  const std::vector<float> v = matryoshka_normalize(pooled, r.dimensions, normalize);
  if (r.base64) return base64_embedding(v, r.opts);
  return v;
}

}  // namespace pypto
