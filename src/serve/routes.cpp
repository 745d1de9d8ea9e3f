// Endpoint registration, the API-key check (the chat page's GET routes pass without a key), CORS,
// and the small endpoints (/health, /v1/models, /version, /metrics).
#include "serve/routes.h"

#include "core/error.h"
#include "core/log.h"
#include "serve/static_routes.h"

namespace pypto {

using ojson = nlohmann::ordered_json;

namespace {

using Handler = void (*)(ServerState&, const httplib::Request&, httplib::Response&);

// Runs a handler, turning what it throws into OpenAI's error object. Never lets an exception
// reach httplib: bad input must not take the server down.
// Captures a plain pointer: the handlers live in s.http, which ServerState owns (a shared_ptr
// here would be a cycle that leaks the state and the engines).
httplib::Server::Handler wrap(ServerState* sp, Handler h) {
  return [sp, h](const httplib::Request& req, httplib::Response& res) {
    ServerState& s = *sp;
    ++s.active_http_requests;
    try {
      h(s, req, res);
    } catch (const ApiError& e) {
      if (e.status == 503 && e.code && *e.code == "queue_full") res.set_header("Retry-After", "1");
      write_error(res, e);
    } catch (const Error& e) {
      write_error(res, invalid_request(e.what()));
    } catch (const std::exception& e) {
      log_error("internal error on ", req.method, " ", req.path, ": ", e.what());
      write_error(res, ApiError(500, str_cat("internal error: ", e.what()), "internal_server_error"));
    }
    --s.active_http_requests;
  };
}

bool equal_constant_time(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i % (b.empty() ? 1 : b.size())]);
  return diff == 0 && !b.empty();
}

void add_cors(const ServerState& s, const httplib::Request& req, httplib::Response& res) {
  if (s.options.allowed_origins.empty() || !req.has_header("Origin")) return;
  const std::string origin = req.get_header_value("Origin");
  for (const std::string& o : s.options.allowed_origins)
    if (o == "*" || o == origin) {
      res.set_header("Access-Control-Allow-Origin", o == "*" ? "*" : origin);
      res.set_header("Vary", "Origin");
      return;
    }
}

void handle_health(ServerState& s, const httplib::Request&, httplib::Response& res) {
  bool ok = s.ready && !s.draining;
  if (ok)
    for (size_t i = 0; i < s.ctx.engines->num_engines(); ++i) ok = ok && s.ctx.engines->is_alive(i);
  write_json(res, ojson{{"status", ok ? "ok" : "not_ready"}}, ok ? 200 : 503);
}

ojson model_card(const ServerState& s) {
  ojson m;
  m["id"] = s.model_name;
  m["object"] = "model";
  m["created"] = s.created;
  m["owned_by"] = "pypto";
  m["root"] = s.options.model_dir.empty() ? s.model_name : s.options.model_dir;
  m["parent"] = nullptr;
  m["max_model_len"] = s.ctx.max_model_len;
  return m;
}

void handle_models(ServerState& s, const httplib::Request&, httplib::Response& res) {
  write_json(res, ojson{{"object", "list"}, {"data", ojson::array({model_card(s)})}});
}

void handle_model(ServerState& s, const httplib::Request& req, httplib::Response& res) {
  const std::string name = req.matches.size() > 1 ? std::string(req.matches[1]) : std::string();
  check_model(s, name);
  write_json(res, model_card(s));
}

void handle_version(ServerState&, const httplib::Request&, httplib::Response& res) {
  write_json(res, ojson{{"version", PYPTO_SERVE_VERSION}});
}

void handle_metrics(ServerState& s, const httplib::Request&, httplib::Response& res) {
  if (!s.ready) {
    res.set_content("", "text/plain; version=0.0.4; charset=utf-8");
    return;
  }
  res.set_content(s.metrics->render(s.model_name, s.gauges()), "text/plain; version=0.0.4; charset=utf-8");
}

}  // namespace

void register_routes(ServerState& state) {
  httplib::Server& http = state.http;
  ServerState* s = &state;
  ServerState* sp = s;

  http.set_pre_routing_handler([s](const httplib::Request& req, httplib::Response& res) {
    add_cors(*s, req, res);
    if (req.method == "OPTIONS" && !s->options.allowed_origins.empty()) {
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.status = 204;
      return httplib::Server::HandlerResponse::Handled;
    }
    if (s->api_key.empty() || req.path == "/health" || is_page_request(*s, req))
      return httplib::Server::HandlerResponse::Unhandled;
    const std::string auth = req.get_header_value("Authorization");
    const std::string prefix = "Bearer ";
    if (auth.compare(0, prefix.size(), prefix) == 0 && equal_constant_time(auth.substr(prefix.size()), s->api_key))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    write_error(res, ApiError(401,
                              auth.empty() ? "missing API key: send 'Authorization: Bearer <key>'"
                                           : "invalid API key",
                              "authentication_error", std::nullopt, "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });

  // httplib's own refusals (no route, body too large, malformed HTTP) get an OpenAI body too.
  http.set_error_handler(httplib::Server::HandlerWithResponse([s](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty() || res.is_chunked_content_provider_) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404)
      write_error(res, ApiError(404, str_cat("no endpoint ", req.method, " ", req.path), "not_found_error"));
    else if (res.status == 413)
      write_error(res, ApiError(413, str_cat("the request body is larger than the limit of ", s->options.max_body_bytes,
                                             " bytes"),
                                "invalid_request_error", std::nullopt, "request_too_large"));
    else
      write_error(res, ApiError(res.status, str_cat("HTTP error ", res.status), "invalid_request_error"));
    return httplib::Server::HandlerResponse::Handled;
  }));
  http.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    log_error("internal error on ", req.method, " ", req.path, ": ", what);
    write_error(res, ApiError(500, str_cat("internal error: ", what), "internal_server_error"));
  });

  http.Get("/health", wrap(sp, handle_health));
  http.Get("/v1/models", wrap(sp, handle_models));
  http.Get(R"(/v1/models/(.+))", wrap(sp, handle_model));
  http.Get("/version", wrap(sp, handle_version));
  http.Get("/metrics", wrap(sp, handle_metrics));
  http.Post("/v1/completions", wrap(sp, handle_completions));
  http.Post("/v1/chat/completions", wrap(sp, handle_chat_completions));
  http.Post("/tokenize", wrap(sp, handle_tokenize));
  http.Post("/detokenize", wrap(sp, handle_detokenize));
  http.Post("/v1/embeddings", wrap(sp, handle_embeddings));  // embeddings.cpp
  for (const char* path : {"/v1/rerank", "/rerank", "/v2/rerank"}) http.Post(path, wrap(sp, handle_rerank));  // rerank.cpp
  for (const char* path : {"/v1/score", "/score"}) http.Post(path, wrap(sp, handle_score));
  http.Post("/pooling", wrap(sp, handle_pooling));
  register_static_routes(*s);  // GET / and /webui/*, unless --no-ui
  if (s->options.profile) {  // --profile: trace windows (docs/measurement.md)
    http.Post("/start_profile", wrap(sp, handle_start_profile));
    http.Post("/stop_profile", wrap(sp, handle_stop_profile));
  }
}

}  // namespace pypto
