// GET / and GET /webui/<file>: the embedded chat page. The files are served as they are in
// src/serve/webui (byte for byte), with a Content-Security-Policy that allows scripts, styles and
// connections to this origin only: the page renders model output as text nodes, and the policy is
// the second wall should a future change slip an HTML sink in.
#include "serve/static_routes.h"

#include <cstddef>
#include <string>
#include <string_view>

namespace pypto {
namespace {

struct EmbeddedFile {
  const char* name;
  const unsigned char* data;
  size_t size;
};
#include "webui_assets.inc"  // kWebuiFiles[], generated at build time from src/serve/webui

const EmbeddedFile* find_file(std::string_view name) {
  for (const EmbeddedFile& f : kWebuiFiles)
    if (name == f.name) return &f;
  return nullptr;
}

const char* content_type(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".css")) return "text/css; charset=utf-8";
  if (name.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (name.ends_with(".svg")) return "image/svg+xml";
  return "application/octet-stream";
}

constexpr std::string_view kPrefix = "/webui/";

void serve_file(httplib::Response& res, const EmbeddedFile& f) {
  res.set_header("Content-Security-Policy",
                 "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
                 "base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  // The page changes only with the binary; "no-cache" makes a browser revalidate, so a rebuilt
  // server never runs an old chat.js against a new index.html.
  res.set_header("Cache-Control", "no-cache");
  res.set_content(reinterpret_cast<const char*>(f.data), f.size, content_type(f.name));
}

}  // namespace

bool is_page_request(const ServerState& s, const httplib::Request& req) {
  if (!s.options.webui || (req.method != "GET" && req.method != "HEAD")) return false;
  return req.path == "/" || std::string_view(req.path).starts_with(kPrefix);
}

void register_static_routes(ServerState& s) {
  if (!s.options.webui) return;
  s.http.Get("/", [](const httplib::Request&, httplib::Response& res) { serve_file(res, *find_file("index.html")); });
  s.http.Get(R"(/webui/([A-Za-z0-9_.-]+))", [](const httplib::Request& req, httplib::Response& res) {
    if (const EmbeddedFile* f = find_file(std::string(req.matches[1])))
      serve_file(res, *f);
    else
      res.status = 404;  // the error handler writes the OpenAI error body
  });
}

}  // namespace pypto
