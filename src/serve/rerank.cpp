// POST /v1/rerank (also /rerank, /v2/rerank; the Jina / Cohere shape vLLM serves) and POST
// /v1/score (vLLM's): on a reranker, Qwen3-Reranker's relevance of each document to the query,
// P("yes") from its published prompt (serve/rerank_prompt.h), with the request's instruction; on
// an embedding model, as vLLM, the cosine similarity of the two embeddings
// (serve/embedding_score.h), the instruction (if any) put on the query in Qwen3-Embedding's form.
#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "serve/embedding_score.h"
#include "serve/pooling_batch.h"
#include "serve/pooling_inputs.h"
#include "serve/pooling_protocol.h"
#include "serve/request_common.h"
#include "serve/rerank_prompt.h"
#include "serve/routes.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

namespace {

// The model serves scores: a reranker, or an embedding model (cosine). Else 400 wrong_runner.
void require_scoring_model(const ServerState& s, const char* endpoint) {
  if (s.ctx.model_config.pooling.task != PoolingTask::Embed) require_task(s, PoolingTask::Score, endpoint);
}

// Scores of (queries[i], documents[i]); `prompt_tokens` gets their token count.
std::vector<double> score_pairs(ServerState& s, const std::vector<std::string>& queries,
                                const std::vector<std::string>& documents, const std::optional<std::string>& instruction,
                                const PoolingOptions& o, const char* queries_field, const char* documents_field,
                                std::chrono::steady_clock::time_point arrival, int64_t& prompt_tokens) {
  check_input_count(s, documents.size(), documents_field);
  if (instruction && instruction->empty()) throw invalid_request("'instruction' is an empty string", "instruction");
  if (s.ctx.model_config.pooling.task == PoolingTask::Embed) {
    // Cosine has no activation: use_activation is accepted and changes nothing (vLLM alike).
    std::vector<std::string> q = queries;
    if (instruction)
      for (std::string& x : q) x = qwen3_embedding_query(*instruction, x);
    EmbeddingScores r = embedding_pair_scores(s, q, documents, o, queries_field, documents_field, arrival);
    prompt_tokens = r.prompt_tokens;
    return std::move(r.scores);
  }
  // truncate_prompt_tokens caps each whole prompt; as for --max-model-len, the middle part (the
  // document's tail) is what is cut, so the reranker keeps its system prefix and answer suffix.
  const std::optional<int64_t> keep = resolve_truncation(o, s.ctx.max_model_len);
  const std::string instr = instruction.value_or(kQwen3RerankDefaultInstruction);
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < documents.size(); ++i) {
    try {
      prompts.push_back(
          qwen3_rerank_prompt(*s.ctx.tokenizer, instr, queries[i], documents[i], keep.value_or(s.ctx.max_model_len),
                              keep ? "truncate_prompt_tokens" : "--max-model-len"));
    } catch (const Error& e) {
      if (keep) throw invalid_request(e.what(), "truncate_prompt_tokens");
      throw invalid_request(str_cat("'", documents_field, "[", i, "]' cannot be scored: ", e.what()), documents_field);
    }
  }
  PoolingBatch batch(s, s.make_id("rerank-"), std::move(prompts), documents_field);
  const std::vector<std::vector<float>> rows = batch.run(arrival);
  prompt_tokens = batch.prompt_tokens();
  const bool sigmoid = o.use_activation.value_or(true);
  std::vector<double> scores;
  for (const std::vector<float>& row : rows) scores.push_back(sigmoid ? qwen3_rerank_score(row) : qwen3_rerank_logit(row));
  return scores;
}

}  // namespace

void handle_rerank(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const auto arrival = std::chrono::steady_clock::now();
  check_ready(s);
  require_scoring_model(s, req.path.c_str());
  const RerankRequest r = parse_rerank_request(parse_json_body(req.body));
  check_model(s, r.model);
  int64_t tokens = 0;
  const std::vector<std::string> queries(r.documents.size(), r.query);
  const std::vector<double> scores = score_pairs(s, queries, r.documents, r.instruction, r.opts, "query", "documents", arrival, tokens);
  s.metrics->pooling_request("rerank", int64_t(scores.size()));
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t(0));
  // Highest first; equal scores keep the documents' order.
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  if (r.top_n > 0 && size_t(r.top_n) < order.size()) order.resize(size_t(r.top_n));
  ojson results = ojson::array();
  for (size_t i : order) {
    ojson item = {{"index", i}};
    if (r.return_documents) item["document"] = {{"text", r.documents[i]}};
    item["relevance_score"] = scores[i];
    results.push_back(std::move(item));
  }
  ojson out;
  out["id"] = response_id(r.opts, "rerank-", s.make_id("rerank-"));
  out["model"] = s.model_name;
  out["usage"] = {{"prompt_tokens", tokens}, {"total_tokens", tokens}};
  out["results"] = std::move(results);
  write_json(res, out);
}

void handle_score(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const auto arrival = std::chrono::steady_clock::now();
  check_ready(s);
  require_scoring_model(s, req.path.c_str());
  const ScoreRequest r = parse_score_request(parse_json_body(req.body));
  check_model(s, r.model);
  int64_t tokens = 0;
  const std::vector<double> scores = score_pairs(s, r.queries, r.documents, r.instruction, r.opts, r.first_field, r.second_field, arrival, tokens);
  s.metrics->pooling_request("score", int64_t(scores.size()));
  ojson data = ojson::array();
  for (size_t i = 0; i < scores.size(); ++i) data.push_back({{"index", i}, {"object", "score"}, {"score", scores[i]}});
  ojson out;
  out["id"] = response_id(r.opts, "score-", s.make_id("score-"));
  out["object"] = "list";
  out["created"] = unix_now();
  out["model"] = s.model_name;
  out["data"] = std::move(data);
  out["usage"] = {{"prompt_tokens", tokens}, {"total_tokens", tokens}};
  write_json(res, out);
}

}  // namespace pypto
