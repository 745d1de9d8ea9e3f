#pragma once
// State shared by the route handlers of one Server (internal to src/serve).
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "serve/api_error.h"
#include "serve/http_server.h"
#include "serve/metrics.h"
#include "serve/server.h"
#include "serve/tool_format.h"
#include "structured/grammar_cache.h"

namespace pypto {

struct ServerState {
  explicit ServerState(ServerOptions opts);

  ServerOptions options;
  std::string model_name;  // served name
  std::string api_key;     // resolved (flag or PYPTO_API_KEY)
  int64_t created = 0;     // unix seconds at start (for /v1/models)
  HttpServer http;

  // Set once by set_context(); read by handlers after `ready` is true.
  ServeContext ctx;
  std::unique_ptr<ServerMetrics> metrics;
  std::vector<std::unique_ptr<std::atomic<int64_t>>> in_flight;  // sequences per replica
  std::atomic<int64_t> total_in_flight{0};
  std::atomic<bool> ready{false};
  std::atomic<bool> draining{false};  // shutting down: new requests get 503, running ones may finish
  std::atomic<bool> stopping{false};  // grace over: running requests are aborted
  std::atomic<int64_t> active_http_requests{0};  // generation handlers running (for shutdown)
  std::atomic<uint64_t> next_id{0};
  // Reasoning split available: the vocabulary has <think> and </think>.
  bool reasoning_tokens = false;
  // The form tool calls are written in (options.tool_call_parser resolved against the template).
  ToolFormat tool_format = ToolFormat::Json;
  // Compiled grammars for structured outputs and tool calls, by constraint (set with ctx).
  std::unique_ptr<structured::GrammarCache> grammars;

  // Gauges per replica for /metrics.
  std::vector<EngineGauges> gauges() const;
  // A fresh id: prefix + 24 hex digits (random per server, counter per request).
  std::string make_id(const char* prefix);

 private:
  uint64_t id_salt_ = 0;
};

// An OpenAI error body.
std::string error_body(const ApiError& e);
void write_error(httplib::Response& res, const ApiError& e);
void write_json(httplib::Response& res, const nlohmann::ordered_json& body, int status = 200);

// Throws 503 while the model loads; 404 when `model` names another model.
void check_ready(const ServerState& s);
void check_model(const ServerState& s, const std::optional<std::string>& model);

}  // namespace pypto
