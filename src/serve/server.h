#pragma once
// The OpenAI-compatible HTTP server (serve mode). Endpoints and fields: docs/api.md.
//
// Threads: httplib's worker threads parse JSON, render the chat template, tokenize, validate and
// format responses; the engine threads (EngineLoop) only batch and sample. The two meet through
// EngineClient (add_request / finish_request) and per-request RequestStreams.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/spec_request_stats.h"
#include "io/model_config.h"
#include "serve/engine_client.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace pypto {

struct ServerOptions {
  std::string host = "0.0.0.0";  // --host
  int port = 8000;               // --port; 0 picks a free port (tests)
  std::string model_dir;         // --model; the default served name is its basename
  std::string served_model_name; // --served-model-name; empty: basename of model_dir
  // --api-key; when empty the environment variable PYPTO_API_KEY is used; when both are empty
  // the server is open. Protects every endpoint except /health (Authorization: Bearer <key>).
  std::string api_key;
  // --max-queued-requests: sequences waiting beyond the engines' running capacity
  // (max_num_seqs per replica); more -> 503 with Retry-After.
  int64_t max_queued_requests = 512;
  size_t max_body_bytes = size_t(16) << 20;  // larger bodies -> 413
  double request_timeout_s = 0;              // 0: none; else the request is aborted after this
  // --generate-config: defaults for fields a request omits (validate with validate_generate_config).
  nlohmann::json generate_config = nlohmann::json::object();
  std::vector<std::string> allowed_origins;  // CORS; empty: no CORS headers
  int http_threads = 0;                      // 0: max_queued_requests + 512 (64..4096)
  double shutdown_grace_s = 10;              // SIGINT/SIGTERM: in-flight requests get this long
  // --profile: POST /start_profile and /stop_profile record a trace at profile_level into
  // profile_output (DIR or FILE.json; empty: ./pypto-traces). Without it they are 404.
  bool profile = false;
  std::string profile_level = "e2e";
  std::string profile_output;
  // The chat page at GET / (src/serve/webui); --no-ui turns it off. It needs no API key itself;
  // its API calls do.
  bool webui = true;
  // --tool-call-parser: the form tool calls are parsed and constrained in (serve/tool_format.h).
  std::string tool_call_parser = "auto";
  // --per-request-spec-decode-stats: each choice's speculative_decoding_stats (none: no field),
  // with k = --speculative-config's num_speculative_tokens (engine/spec_request_stats.h).
  SpecStatsLevel per_request_spec_decode_stats = SpecStatsLevel::None;
  int32_t num_speculative_tokens = 0;
};

// What the server serves. Built by the caller (serve_mode: load_replicas + tokenizer + template).
struct ServeContext {
  std::shared_ptr<EngineClient> engines;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::shared_ptr<const ChatTemplate> chat_template;  // null: chat endpoints answer 400
  ModelConfig model_config;
  int64_t max_model_len = 0;  // prompt + output tokens of one request
  int32_t max_num_seqs = 1;   // running requests per replica (for the queue bound and gauges)
};

// Loads the chat template from model_dir's tokenizer_config.json through the tokenizer (null
// when the checkpoint has none). Throws Error when the template does not parse.
std::shared_ptr<const ChatTemplate> load_chat_template(const Tokenizer& tokenizer);

// The context for a model directory: its tokenizer and chat template (Error when they do not
// load), the engines, and the limits the server checks requests against.
ServeContext make_serve_context(const std::string& model_dir, std::shared_ptr<EngineClient> engines,
                                const ModelConfig& config, int64_t max_model_len, int32_t max_num_seqs);

struct ServerState;
class HeapReturner;

class Server {
 public:
  explicit Server(ServerOptions options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and serves on a background thread (Error when the address cannot be bound). Until
  // set_context() /health answers 503 and generation endpoints 503 "loading".
  void start();
  int port() const;
  // The model is loaded: requests are served from now on and /health turns 200.
  void set_context(ServeContext context);
  // Stops accepting, gives in-flight requests up to `grace_s` to finish, aborts the rest, joins.
  // Idempotent.
  void stop(double grace_s = 0);

  const ServerState& state() const { return *state_; }

 private:
  std::shared_ptr<ServerState> state_;
  std::thread thread_;
  std::unique_ptr<HeapReturner> heap_;  // returns freed body pages (heap_return.h)
  int port_ = -1;
};

// Serve mode: starts the server (so /health says 503 while loading), runs `load`, serves until
// SIGINT or SIGTERM, then stops within options.shutdown_grace_s. Returns the exit code (0 on a
// signal; 1 with the message on stderr when binding or loading fails).
int run_server(const ServerOptions& options, const std::function<ServeContext()>& load);

}  // namespace pypto
