#include "serve/server_state.h"

#include <cstdlib>
#include <filesystem>
#include <random>

#include "core/error.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

ServerState::ServerState(ServerOptions opts) : options(std::move(opts)) {
  model_name = options.served_model_name;
  if (model_name.empty() && !options.model_dir.empty()) {
    std::filesystem::path p(options.model_dir);
    if (!p.has_filename()) p = p.parent_path();  // "dir/" -> "dir"
    model_name = p.filename().string();
  }
  if (model_name.empty()) model_name = "default";
  api_key = options.api_key;
  if (api_key.empty())
    if (const char* env = std::getenv("PYPTO_API_KEY")) api_key = env;
  created = int64_t(std::time(nullptr));
  std::random_device rd;
  id_salt_ = (uint64_t(rd()) << 32) ^ rd();
}

std::vector<EngineGauges> ServerState::gauges() const {
  std::vector<EngineGauges> g;
  if (!ready) return g;
  for (size_t i = 0; i < ctx.engines->num_engines(); ++i) {
    const EngineLoopStats st = ctx.engines->stats(i);
    EngineGauges e;
    e.num_requests_running = st.num_running;
    e.num_requests_waiting = st.num_waiting;
    e.num_active_requests = ctx.engines->num_active_requests(i);
    e.kv_cache_usage = st.kv_usage;
    e.num_preemptions = st.num_preemptions;
    e.prefix_cache_queries = st.prefix_cache.queried_tokens;
    e.prefix_cache_hits = st.prefix_cache.hit_tokens;
    e.state_snapshot_restores = st.prefix_cache.state.restored;
    e.state_snapshots_saved = st.prefix_cache.state.saved;
    e.state_snapshots_evicted = st.prefix_cache.state.evicted;
    e.prefix_cache_tokens_without_state = st.prefix_cache.tokens_without_state;
    e.prefill = st.prefill;
    e.speculative = st.speculative;
    e.num_speculative_tokens = st.num_speculative_tokens;
    e.spec_decode = st.spec_decode;
    e.spec_cost = st.spec_cost;
    g.push_back(e);
  }
  return g;
}

std::string ServerState::make_id(const char* prefix) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(id_salt_),
                static_cast<unsigned long long>(next_id.fetch_add(1) & 0xffffffffull));
  return std::string(prefix) + buf;
}

std::string error_body(const ApiError& e) {
  ojson err;
  err["message"] = e.what();
  err["type"] = e.type;
  err["param"] = e.param ? ojson(*e.param) : ojson(nullptr);
  err["code"] = e.code ? ojson(*e.code) : ojson(nullptr);
  return ojson{{"error", err}}.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

void write_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
}

void write_json(httplib::Response& res, const ojson& body, int status) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, ojson::error_handler_t::replace), "application/json");
}

void check_ready(const ServerState& s) {
  if (s.draining) throw ApiError(503, "the server is shutting down", "service_unavailable");
  if (!s.ready) throw ApiError(503, "the model is still loading; retry when /health answers 200", "service_unavailable");
}

void check_model(const ServerState& s, const std::optional<std::string>& model) {
  if (model && *model != s.model_name)
    throw ApiError(404, str_cat("The model `", *model, "` does not exist. This server serves `", s.model_name, "`."),
                   "not_found_error", "model", "model_not_found");
}

}  // namespace pypto
