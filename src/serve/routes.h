#pragma once
// The route handlers (one file per endpoint family) and their registration on the HTTP server.
// A handler throws ApiError for anything the client did wrong; the wrapper in routes.cpp turns it
// into OpenAI's error object.
#include <httplib.h>

#include "serve/openai_protocol.h"
#include "serve/server_state.h"

namespace pypto {

void handle_completions(ServerState& s, const httplib::Request& req, httplib::Response& res);
void handle_chat_completions(ServerState& s, const httplib::Request& req, httplib::Response& res);
void handle_tokenize(ServerState& s, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(ServerState& s, const httplib::Request& req, httplib::Response& res);
// Pooling endpoints (embeddings.cpp, rerank.cpp; docs/api.md#embeddings-and-reranking).
void handle_embeddings(ServerState& s, const httplib::Request& req, httplib::Response& res);
void handle_rerank(ServerState& s, const httplib::Request& req, httplib::Response& res);
void handle_score(ServerState& s, const httplib::Request& req, httplib::Response& res);
void handle_pooling(ServerState& s, const httplib::Request& req, httplib::Response& res);  // embeddings.cpp
// 400 (code wrong_runner) naming the runner when the served model is not one `endpoint` can use:
// `task` None for the generate endpoints, Embed for /v1/embeddings, Score for rerank and score.
void require_task(const ServerState& s, PoolingTask task, const char* endpoint);  // pooling_batch.cpp
void handle_start_profile(ServerState& s, const httplib::Request& req, httplib::Response& res);  // profile_routes.cpp
void handle_stop_profile(ServerState& s, const httplib::Request& req, httplib::Response& res);

// Renders the chat prompt (messages, tools, add_generation_prompt, template kwargs) with the
// model's template; 400 when the template raises or the model has none.
std::string render_chat_prompt(const ServerState& s, const nlohmann::ordered_json& messages,
                               const nlohmann::ordered_json& tools, bool add_generation_prompt,
                               const nlohmann::ordered_json& kwargs);

// Registers every endpoint, the API-key check, CORS and the error handlers.
void register_routes(ServerState& s);

}  // namespace pypto
