#include "cli/soak_abuse.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <nlohmann/json.hpp>

namespace pypto::bench {

using nlohmann::json;

const std::vector<AbuseKind>& all_abuse_kinds() {
  static const std::vector<AbuseKind> k = {AbuseKind::Malformed, AbuseKind::UnknownField, AbuseKind::WrongType,
                                           AbuseKind::Oversized, AbuseKind::DeepBody,     AbuseKind::DeepSchema,
                                           AbuseKind::Idle};
  return k;
}

const char* abuse_kind_name(AbuseKind k) {
  switch (k) {
    case AbuseKind::Malformed: return "malformed";
    case AbuseKind::UnknownField: return "unknown-field";
    case AbuseKind::WrongType: return "wrong-type";
    case AbuseKind::Oversized: return "oversized";
    case AbuseKind::DeepBody: return "deep-body";
    case AbuseKind::DeepSchema: return "deep-schema";
    case AbuseKind::Idle: return "idle";
  }
  return "?";
}

std::optional<AbuseKind> abuse_kind_named(const std::string& name) {
  for (AbuseKind k : all_abuse_kinds())
    if (name == abuse_kind_name(k)) return k;
  return std::nullopt;
}

std::string abuse_body(AbuseKind k, const std::string& model, const AbuseOptions& o) {
  const std::string m = json(model).dump();
  switch (k) {
    case AbuseKind::Malformed: return "{\"model\": " + m + ", \"prompt\": \"cut short";
    case AbuseKind::UnknownField: return json{{"model", model}, {"prompt", "hi"}, {"max_tokens", 4}, {"frobnicate", true}}.dump();
    case AbuseKind::WrongType: return json{{"model", model}, {"prompt", "hi"}, {"max_tokens", "ten"}}.dump();
    case AbuseKind::Oversized: {
      // Words the tokenizer splits cheaply; far more tokens than any context length.
      std::string prompt;
      prompt.reserve(o.oversized_bytes);
      while (prompt.size() + 6 <= o.oversized_bytes) prompt += "sun a ";
      return json{{"model", model}, {"prompt", prompt}, {"max_tokens", 4}}.dump();
    }
    case AbuseKind::DeepBody:
      return "{\"model\": " + m + ", \"max_tokens\": 4, \"prompt\": " + std::string(size_t(o.deep_depth), '[') + "1" +
             std::string(size_t(o.deep_depth), ']') + "}";
    case AbuseKind::DeepSchema: {
      std::string schema = "{\"not\": {}}";
      for (int i = 0; i < o.deep_depth; ++i) schema = "{\"type\": \"object\", \"properties\": {\"a\": " + schema + "}}";
      return "{\"model\": " + m +
             ", \"max_tokens\": 4, \"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"response_format\": "
             "{\"type\": \"json_schema\", \"json_schema\": {\"name\": \"deep\", \"schema\": " +
             schema + "}}}";
    }
    case AbuseKind::Idle: return "";
  }
  return "";
}

namespace {

// Holds a connection open with half a request sent, then closes it (or notices the server did).
Exchange idle_connection(const std::string& base_url, double idle_s) {
  Exchange x;
  const size_t colon = base_url.rfind(':');
  const size_t host_at = base_url.find("://");
  const std::string host = base_url.substr(host_at + 3, colon - host_at - 3);
  const int port = std::stoi(base_url.substr(colon + 1));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  if (fd < 0 || ::inet_pton(AF_INET, host == "localhost" ? "127.0.0.1" : host.c_str(), &addr.sin_addr) != 1 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    x.error = "cannot connect to " + base_url;
    if (fd >= 0) ::close(fd);
    return x;
  }
  const std::string half = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 64\r\n\r\n{\"pro";
  (void)!::send(fd, half.data(), half.size(), MSG_NOSIGNAL);
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(idle_s);
  const auto t0 = std::chrono::steady_clock::now();
  char buf[512];
  while (std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) > 0) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;  // the server closed it (a read timeout): fine
      if (x.status == 0 && n > 12) x.status = std::atoi(buf + 9);  // "HTTP/1.1 408"
    }
  }
  ::close(fd);
  x.latency_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  x.result = x.status >= 500 ? ExchangeResult::ServerError : ExchangeResult::Answered;
  if (x.status >= 500) x.error = "HTTP " + std::to_string(x.status) + " to a half-sent request";
  return x;
}

}  // namespace

Exchange run_abuse(AbuseKind k, const std::string& base_url, const std::string& model, const AbuseOptions& o) {
  if (k == AbuseKind::Idle) return idle_connection(base_url, o.idle_s);
  const std::string path = k == AbuseKind::DeepSchema ? "/v1/chat/completions" : "/v1/completions";
  return post_expecting_client_error(base_url, path, abuse_body(k, model, o), 120);
}

}  // namespace pypto::bench
