#pragma once
// Request parsing and vector formatting of the pooling endpoints (docs/api.md#embeddings-and-reranking):
//  - POST /v1/embeddings, OpenAI's shape: input as a string, a list of strings, a list of token
//    ids or a list of such lists; encoding_format float | base64 (little-endian float32, what the
//    official clients ask for by default); dimensions (Matryoshka: the first d values, then L2).
//  - POST /v1/rerank (/rerank, /v2/rerank), the Jina / Cohere shape: query, documents (strings or
//    {"text": ...}), top_n, return_documents; plus `instruction` for Qwen3-Reranker's prompt.
//  - POST /v1/score, vLLM's shape: text_1 (string or list) against text_2 (string or list), or
//    the same as queries/documents, queries/items, data_1/data_2.
//  - POST /pooling, vLLM's: the /v1/embeddings request plus `task`.
//  Both also take vLLM's chat form: `messages` (+ add_generation_prompt, chat_template_kwargs)
//  in place of `input`.
// Each also takes vLLM's extra fields (serve/pooling_options.h). Every parse error is a 400
// naming the field; unknown fields are refused by name.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/pooling_options.h"

namespace pypto {

// One input of /v1/embeddings: text (tokenized with the post-processor: Qwen3-Embedding's appends
// <|endoftext|>) or token ids (used as given).
struct EmbeddingInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> token_ids;
};

struct EmbeddingRequest {
  std::optional<std::string> model;
  std::vector<EmbeddingInput> inputs;
  bool base64 = false;                // encoding_format
  std::optional<int64_t> dimensions;  // checked against the model by the handler
  std::optional<std::string> task;    // /pooling only; checked against the model by the handler
  PoolingOptions opts;
  // vLLM's chat form: messages (normalised as /v1/chat/completions does) in place of `input`,
  // rendered by the model's chat template into one text input (inputs stays empty).
  std::optional<nlohmann::ordered_json> messages;
  bool add_generation_prompt = false;
  nlohmann::ordered_json chat_template_kwargs;  // null or an object
};
// pooling_endpoint: the body of POST /pooling (takes `task` as well).
EmbeddingRequest parse_embedding_request(const nlohmann::ordered_json& body, bool pooling_endpoint = false);

struct RerankRequest {
  std::optional<std::string> model;
  std::string query;
  std::vector<std::string> documents;
  int64_t top_n = 0;  // 0: all
  bool return_documents = true;
  std::optional<std::string> instruction;
  PoolingOptions opts;
};
RerankRequest parse_rerank_request(const nlohmann::ordered_json& body);

// /v1/score: pairs (text_1[i], text_2[i]), a single text_1 paired with every text_2. The sides may
// also be spelled queries/documents, queries/items or data_1/data_2 (newer vLLM).
struct ScoreRequest {
  std::optional<std::string> model;
  const char* first_field = "text_1";   // the spelling the request used, for errors
  const char* second_field = "text_2";
  std::vector<std::string> queries, documents;  // equal lengths after expansion
  std::optional<std::string> instruction;
  PoolingOptions opts;
};
ScoreRequest parse_score_request(const nlohmann::ordered_json& body);

// v[:d], then divided by its L2 norm when normalize (the norm summed in double). d = v.size()
// when unset. A zero vector stays zero.
std::vector<float> matryoshka_normalize(const std::vector<float>& v, std::optional<int64_t> d, bool normalize);
// Standard base64 (RFC 4648, with '=' padding) of n bytes.
std::string base64_encode(const unsigned char* p, size_t n);
// Standard base64 of the floats' little-endian float32 bytes.
std::string base64_f32le(const std::vector<float>& v);

}  // namespace pypto
