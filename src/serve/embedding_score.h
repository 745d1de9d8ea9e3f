#pragma once
// /v1/score and /v1/rerank on an embedding model, as vLLM serves them: the score of a pair is the
// cosine similarity of the two texts' embeddings (the full pooled vectors; cosine does not depend
// on their L2 normalisation). Each distinct text is embedded once (a query paired with N documents
// costs N + 1 inputs) with the request's truncation and tokenized as /v1/embeddings does (the
// post-processor appends Qwen3-Embedding's <|endoftext|>).
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "serve/pooling_options.h"
#include "serve/server_state.h"

namespace pypto {

struct EmbeddingScores {
  std::vector<double> scores;  // cosine(a[i], b[i])
  int64_t prompt_tokens = 0;   // of the distinct texts embedded
};

// a and b as long as each other; a_field / b_field name them in errors ("text_1", "query", ...).
EmbeddingScores embedding_pair_scores(ServerState& s, const std::vector<std::string>& a,
                                      const std::vector<std::string>& b, const PoolingOptions& o, const char* a_field,
                                      const char* b_field, std::chrono::steady_clock::time_point arrival);

// Cosine similarity in double; 0 when either vector is zero.
double cosine_similarity(const std::vector<float>& x, const std::vector<float>& y);

// Qwen3-Embedding's query form with an instruction: "Instruct: {instruction}\nQuery:{query}"
// (no space after "Query:", as the model card writes it).
std::string qwen3_embedding_query(const std::string& instruction, const std::string& query);

}  // namespace pypto
