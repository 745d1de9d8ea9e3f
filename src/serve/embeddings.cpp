// POST /v1/embeddings (OpenAI's shape, vLLM's extras id and created) and POST /pooling (vLLM's):
// the last-token pooled, final-normed hidden state of each input, cut to `dimensions` and
// L2-normalised. /pooling on a reranker gives each input's score (see handle_pooling).
#include "core/error.h"
#include "serve/pooling_batch.h"
#include "serve/pooling_inputs.h"
#include "serve/pooling_protocol.h"
#include "serve/request_common.h"
#include "serve/rerank_prompt.h"
#include "serve/routes.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

namespace {

// The inputs' token ids after add_special_tokens and truncate_prompt_tokens; the chat form is
// one input, the messages rendered by the chat template.
std::vector<std::vector<int32_t>> tokenize_inputs(const ServerState& s, const EmbeddingRequest& r) {
  const std::optional<int64_t> keep = resolve_truncation(r.opts, s.ctx.max_model_len);
  if (r.messages) {
    const std::string text = render_chat_prompt(s, *r.messages, nlohmann::ordered_json(), r.add_generation_prompt,
                                                r.chat_template_kwargs);
    return {pooling_token_ids(s, EmbeddingInput{true, text, {}}, r.opts, keep, "messages", "messages")};
  }
  check_input_count(s, r.inputs.size(), "input");
  std::vector<std::vector<int32_t>> out;
  for (size_t i = 0; i < r.inputs.size(); ++i)
    out.push_back(pooling_token_ids(s, r.inputs[i], r.opts, keep,
                                    r.inputs.size() == 1 ? std::string("input") : str_cat("input[", i, "]"), "input"));
  return out;
}

ojson response(ServerState& s, const char* prefix, ojson data, int64_t tokens, const PoolingOptions& o) {
  ojson out;
  out["id"] = response_id(o, prefix, s.make_id(prefix));
  out["object"] = "list";
  out["created"] = unix_now();
  out["model"] = s.model_name;
  out["data"] = std::move(data);
  out["usage"] = {{"prompt_tokens", tokens}, {"total_tokens", tokens}};
  return out;
}

}  // namespace

void handle_embeddings(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const auto arrival = std::chrono::steady_clock::now();
  check_ready(s);
  require_task(s, PoolingTask::Embed, "/v1/embeddings");
  const EmbeddingRequest r = parse_embedding_request(parse_json_body(req.body));
  check_model(s, r.model);
  check_dimensions(s, r.dimensions);
  PoolingBatch batch(s, s.make_id("embd-"), tokenize_inputs(s, r), "input");
  const std::vector<std::vector<float>> vectors = batch.run(arrival);
  s.metrics->pooling_request("embeddings", int64_t(vectors.size()));
  ojson data = ojson::array();
  for (size_t i = 0; i < vectors.size(); ++i)
    data.push_back({{"object", "embedding"}, {"index", i}, {"embedding", embedding_json(s, vectors[i], r)}});
  write_json(res, response(s, "embd-", std::move(data), batch.prompt_tokens(), r.opts));
}

// vLLM's /pooling: the same request as /v1/embeddings plus `task`, and `data` per input. An
// embedding model gives its vector (`task` embed); a reranker (`task` classify or score) the
// input's score, [sigmoid(logit(yes) - logit(no))] (the raw difference with use_activation
// false): its input is the whole prompt, as the client formatted it (serve/rerank_prompt.h).
void handle_pooling(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const auto arrival = std::chrono::steady_clock::now();
  check_ready(s);
  const PoolingTask task = s.ctx.model_config.pooling.task;
  if (task != PoolingTask::Score) require_task(s, PoolingTask::Embed, "/pooling");
  const EmbeddingRequest r = parse_embedding_request(parse_json_body(req.body), true);
  check_model(s, r.model);
  if (r.task) {
    const bool ok = task == PoolingTask::Embed ? *r.task == "embed" : (*r.task == "classify" || *r.task == "score");
    if (!ok)
      throw invalid_request(str_cat("'task' is '", *r.task, "'; this ",
                                    task == PoolingTask::Embed ? "embedding model serves: embed"
                                                               : "reranker serves: classify, score"),
                            "task");
  }
  if (task == PoolingTask::Score && r.dimensions)
    throw invalid_request("'dimensions' applies to embedding models; this is a reranker", "dimensions");
  check_dimensions(s, r.dimensions);
  PoolingBatch batch(s, s.make_id("pool-"), tokenize_inputs(s, r), "input");
  const std::vector<std::vector<float>> rows = batch.run(arrival);
  s.metrics->pooling_request("pooling", int64_t(rows.size()));
  ojson data = ojson::array();
  for (size_t i = 0; i < rows.size(); ++i) {
    ojson v;
    if (task == PoolingTask::Embed) {
      v = embedding_json(s, rows[i], r);
    } else {
      const double score = r.opts.use_activation.value_or(true) ? qwen3_rerank_score(rows[i]) : qwen3_rerank_logit(rows[i]);
      const std::vector<float> one = {float(score)};
      v = r.base64 ? ojson(base64_embedding(one, r.opts)) : ojson::array({score});
    }
    data.push_back({{"index", i}, {"object", "pooling"}, {"data", std::move(v)}});
  }
  write_json(res, response(s, "pool-", std::move(data), batch.prompt_tokens(), r.opts));
}

}  // namespace pypto
