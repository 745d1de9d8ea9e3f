#include "cli/serve_mode.h"

#include "core/error.h"
#include "core/log.h"
#include "core/memory.h"
#include "engine/speculative_config.h"
#include "parallel/rank_health.h"
#include "parallel/replicas/load_replicas.h"
#include "serve/openai_protocol.h"
#include "serve/replica_engine_client.h"
#include "serve/tool_format.h"

namespace pypto::cli {
namespace {

// The server's EngineClient that also owns what it routes over: the replicas' loops, models and
// KV caches. Members go in reverse order: the router client first, then the engines.
class OwningEngineClient : public EngineClient {
 public:
  explicit OwningEngineClient(std::shared_ptr<LoadedEngine> le) : le_(std::move(le)), inner_(le_->replicas) {}
  Submitted add_request(const EngineRequest& req) override { return inner_.add_request(req); }
  void finish_request(size_t engine_index, const std::string& request_id, FinishReason reason,
                      std::optional<int32_t> index) override {
    inner_.finish_request(engine_index, request_id, reason, index);
  }
  size_t num_engines() const override { return inner_.num_engines(); }
  // A TP rank process that died or hangs (parallel/rank_health.h) makes the engine unhealthy.
  bool is_alive(size_t i) const override { return inner_.is_alive(i) && !rank_fault(); }
  int64_t num_active_requests(size_t i) const override { return inner_.num_active_requests(i); }
  EngineLoopStats stats(size_t i) const override { return inner_.stats(i); }

 private:
  std::shared_ptr<LoadedEngine> le_;
  ReplicaSetEngineClient inner_;
};

}  // namespace

void add_serve_options(CLI::App& app, ServerOptions& so) {
  app.add_option("--api-key", so.api_key, "require 'Authorization: Bearer KEY' on every endpoint but /health "
                                          "(default: $PYPTO_API_KEY)");
  app.add_option("--max-queued-requests", so.max_queued_requests,
                 "requests waiting beyond the running capacity; more are refused with 503 + Retry-After")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--request-timeout", so.request_timeout_s, "seconds after which a request is aborted (0: none)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-body-bytes", so.max_body_bytes, "largest request body; larger ones get 413")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_flag_callback(
      "--no-ui", [&so] { so.webui = false; }, "do not serve the chat page at GET / (src/serve/webui)");
  app.add_option("--allowed-origins", so.allowed_origins, "CORS origins to allow (repeatable; default none)");
  app.add_option("--tool-call-parser", so.tool_call_parser,
                 std::string("the form tool calls are written in: ") + kToolCallParserNames +
                     " (auto: the form the chat template writes)")
      ->check([](const std::string& v) {
        try {
          check_tool_call_parser_name(v);
          return std::string();
        } catch (const Error& e) {
          return std::string(e.what());
        }
      })
      ->capture_default_str();
  // vLLM needs it for tool_choice "auto"; here tool calls are always parsed when a request has tools.
  app.add_flag("--enable-auto-tool-choice")->description("accepted for vLLM compatibility (auto tool choice is always on)");
  app.add_option("--shutdown-grace", so.shutdown_grace_s, "seconds in-flight requests get on SIGINT/SIGTERM")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

int run_serve(const RunOptions& o, ServerOptions so, const std::string& model_dir) {
  so.host = o.host;
  so.port = o.port;
  so.model_dir = model_dir;
  so.served_model_name = o.served_model_name;
  so.generate_config = o.generate_config_json;
  so.profile = o.profile, so.profile_level = o.profile_level, so.profile_output = o.profile_output;
  so.per_request_spec_decode_stats = parse_spec_stats_level(o.per_request_spec_decode_stats);
  if (!o.speculative_config.empty())
    so.num_speculative_tokens = parse_speculative_config(o.speculative_config).num_speculative_tokens;
  validate_generate_config(so.generate_config);
  return run_server(so, [&]() {
    auto le = std::make_shared<LoadedEngine>(load_replicas(replica_load_options(o, model_dir)));
    char b1[32], b2[32];
    log_info("model ", model_dir, ": ", le->config.num_hidden_layers, " layers, weights ",
             format_bytes(le->weight_bytes, b1, sizeof b1), " staged in ", le->load_seconds, " s; backend ",
             le->backend_name, ", dp ", le->dp, le->pp > 1 ? str_cat(" x pp ", le->pp) : std::string(), " x tp ", le->tp, ", ", le->threads, " thread(s) per rank");
    log_info(le->capacity.summary(), " (", format_bytes(le->capacity.kv_bytes, b2, sizeof b2), " per replica)");
    const ModelConfig cfg = le->config;
    auto client = std::make_shared<OwningEngineClient>(std::move(le));
    return make_serve_context(model_dir, client, cfg, o.max_model_len, o.max_num_seqs);
  });
}

}  // namespace pypto::cli
