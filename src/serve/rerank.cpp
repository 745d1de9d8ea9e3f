// POST /v1/rerank (also /rerank, /v2/rerank; the Jina / Cohere shape vLLM serves) and POST
// /v1/score (vLLM's): Qwen3-Reranker's relevance of each document to the query, P("yes") from its
// published prompt (serve/rerank_prompt.h), with the request's instruction.
#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "serve/pooling_batch.h"
#include "serve/pooling_protocol.h"
#include "serve/request_common.h"
#include "serve/rerank_prompt.h"
#include "serve/routes.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

namespace {

// Scores of (queries[i], documents[i]); `prompt_tokens` gets their token count.
std::vector<double> score_pairs(ServerState& s, const std::vector<std::string>& queries,
                                const std::vector<std::string>& documents, const std::optional<std::string>& instruction,
                                const char* documents_field, std::chrono::steady_clock::time_point arrival,
                                int64_t& prompt_tokens) {
  const int64_t max_inputs = int64_t(s.ctx.max_num_seqs) * int64_t(s.ctx.engines->num_engines()) +
                             s.options.max_queued_requests;
  if (int64_t(documents.size()) > max_inputs)
    throw invalid_request(str_cat("'", documents_field, "' has ", documents.size(), " items; at most ", max_inputs,
                                  " per request (--max-num-seqs x replicas + --max-queued-requests)"),
                          documents_field);
  if (instruction && instruction->empty()) throw invalid_request("'instruction' is an empty string", "instruction");
  const std::string instr = instruction.value_or(kQwen3RerankDefaultInstruction);
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < documents.size(); ++i) {
    try {
      prompts.push_back(qwen3_rerank_prompt(*s.ctx.tokenizer, instr, queries[i], documents[i], s.ctx.max_model_len));
    } catch (const Error& e) {
      throw invalid_request(str_cat("'", documents_field, "[", i, "]' cannot be scored: ", e.what()), documents_field);
    }
  }
  PoolingBatch batch(s, s.make_id("rerank-"), std::move(prompts), documents_field);
  const std::vector<std::vector<float>> rows = batch.run(arrival);
  prompt_tokens = batch.prompt_tokens();
  std::vector<double> scores;
  for (const std::vector<float>& row : rows) scores.push_back(qwen3_rerank_score(row));
  return scores;
}

}  // namespace

void handle_rerank(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const auto arrival = std::chrono::steady_clock::now();
  check_ready(s);
  require_task(s, PoolingTask::Score, req.path.c_str());
  const RerankRequest r = parse_rerank_request(parse_json_body(req.body));
  check_model(s, r.model);
  int64_t tokens = 0;
  const std::vector<std::string> queries(r.documents.size(), r.query);
  const std::vector<double> scores = score_pairs(s, queries, r.documents, r.instruction, "documents", arrival, tokens);
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
  out["id"] = s.make_id("rerank-");
  out["model"] = s.model_name;
  out["usage"] = {{"prompt_tokens", tokens}, {"total_tokens", tokens}};
  out["results"] = std::move(results);
  write_json(res, out);
}

void handle_score(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const auto arrival = std::chrono::steady_clock::now();
  check_ready(s);
  require_task(s, PoolingTask::Score, req.path.c_str());
  const ScoreRequest r = parse_score_request(parse_json_body(req.body));
  check_model(s, r.model);
  int64_t tokens = 0;
  const std::vector<double> scores = score_pairs(s, r.queries, r.documents, r.instruction, "text_2", arrival, tokens);
  s.metrics->pooling_request("score", int64_t(scores.size()));
  ojson data = ojson::array();
  for (size_t i = 0; i < scores.size(); ++i) data.push_back({{"index", i}, {"object", "score"}, {"score", scores[i]}});
  ojson out;
  out["id"] = s.make_id("score-");
  out["object"] = "list";
  out["created"] = unix_now();
  out["model"] = s.model_name;
  out["data"] = std::move(data);
  out["usage"] = {{"prompt_tokens", tokens}, {"total_tokens", tokens}};
  write_json(res, out);
}

}  // namespace pypto
