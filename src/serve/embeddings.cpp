// POST /v1/embeddings (OpenAI's shape, vLLM's extras id and created): the last-token pooled,
// final-normed hidden state of each input, cut to `dimensions` and L2-normalised.
#include "core/error.h"
#include "serve/pooling_batch.h"
#include "serve/pooling_protocol.h"
#include "serve/request_common.h"
#include "serve/routes.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

namespace {

// Matryoshka sizes: 32 up to the hidden size (the Qwen3-Embedding model cards' range), or the
// hidden size alone for a model narrower than 32.
constexpr int64_t kMinDimensions = 32;

std::vector<std::vector<int32_t>> tokenize_inputs(const ServerState& s, const EmbeddingRequest& r) {
  const Tokenizer& tok = *s.ctx.tokenizer;
  const int64_t vocab = std::min<int64_t>(tok.vocab_size(), s.ctx.model_config.vocab_size);
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const EmbeddingInput& in = r.inputs[i];
    const std::string field = r.inputs.size() == 1 ? "input" : str_cat("input[", i, "]");
    std::vector<int32_t> ids;
    if (in.is_text) {
      try {
        ids = tok.encode(in.text, true);  // the post-processor appends <|endoftext|> (Qwen3-Embedding)
      } catch (const Error& e) {
        throw invalid_request(str_cat("'", field, "' cannot be tokenized: ", e.what()), "input");
      }
    } else {
      ids = in.token_ids;  // as given: no token is appended to token ids
      for (int32_t id : ids)
        if (id >= vocab)
          throw invalid_request(str_cat("'", field, "' has token id ", id, ": allowed 0 <= id < ", vocab), "input");
    }
    if (int64_t(ids.size()) > s.ctx.max_model_len)
      throw invalid_request(str_cat("'", field, "' is ", ids.size(), " tokens; this model's maximum context length is ",
                                    s.ctx.max_model_len, " tokens (--max-model-len): reduce the length of the input"),
                            "input", "context_length_exceeded");
    out.push_back(std::move(ids));
  }
  return out;
}

}  // namespace

void handle_embeddings(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const auto arrival = std::chrono::steady_clock::now();
  check_ready(s);
  require_task(s, PoolingTask::Embed, "/v1/embeddings");
  const EmbeddingRequest r = parse_embedding_request(parse_json_body(req.body));
  check_model(s, r.model);
  const int64_t hidden = s.ctx.model_config.hidden_size;
  if (r.dimensions) {
    const int64_t lo = std::min(kMinDimensions, hidden);
    if (*r.dimensions < lo || *r.dimensions > hidden)
      throw invalid_request(str_cat("'dimensions' is ", *r.dimensions, "; this model allows ", lo, " to ", hidden,
                                    " (Matryoshka: the first d values, then normalised)"),
                            "dimensions");
  }
  const int64_t max_inputs = int64_t(s.ctx.max_num_seqs) * int64_t(s.ctx.engines->num_engines()) +
                             s.options.max_queued_requests;
  if (int64_t(r.inputs.size()) > max_inputs)
    throw invalid_request(str_cat("'input' has ", r.inputs.size(), " items; at most ", max_inputs,
                                  " per request (--max-num-seqs x replicas + --max-queued-requests)"),
                          "input");
  PoolingBatch batch(s, s.make_id("embd-"), tokenize_inputs(s, r), "input");
  const std::vector<std::vector<float>> vectors = batch.run(arrival);
  s.metrics->pooling_request("embeddings", int64_t(vectors.size()));
  const bool normalize = s.ctx.model_config.pooling.normalize;

  ojson data = ojson::array();
  for (size_t i = 0; i < vectors.size(); ++i) {
    const std::vector<float> v = matryoshka_normalize(vectors[i], r.dimensions, normalize);
    ojson item = {{"object", "embedding"}, {"index", i}};
    if (r.base64) item["embedding"] = base64_f32le(v);
    else item["embedding"] = v;
    data.push_back(std::move(item));
  }
  ojson out;
  out["id"] = s.make_id("embd-");
  out["object"] = "list";
  out["created"] = unix_now();
  out["model"] = s.model_name;
  out["data"] = std::move(data);
  out["usage"] = {{"prompt_tokens", batch.prompt_tokens()}, {"total_tokens", batch.prompt_tokens()}};
  write_json(res, out);
}

}  // namespace pypto
