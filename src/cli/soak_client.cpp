#include "cli/soak_client.h"

#include <sys/socket.h>

#include <chrono>
#include <thread>

#include <httplib.h>

#include "cli/bench_client.h"

namespace pypto::bench {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

const char* exchange_result_name(ExchangeResult r) {
  switch (r) {
    case ExchangeResult::Answered: return "answered";
    case ExchangeResult::Rejected: return "rejected";
    case ExchangeResult::ServerError: return "server_error";
    case ExchangeResult::Dropped: return "dropped";
    case ExchangeResult::Disconnected: return "disconnected";
  }
  return "?";
}

namespace {

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

void set_timeouts(httplib::Client& cli, double read_timeout_s) {
  const auto whole = time_t(read_timeout_s);
  cli.set_read_timeout(whole, time_t((read_timeout_s - double(whole)) * 1e6));
  cli.set_connection_timeout(10, 0);
  cli.set_write_timeout(30, 0);
  cli.set_keep_alive(false);
}

bool is_error_json(const std::string& body) {
  const json j = json::parse(body, nullptr, false);
  return !j.is_discarded() && j.is_object() && j.contains("error") && j["error"].is_object() &&
         j["error"].contains("message");
}

// A non-200 answer: a refusal when it is a 4xx (or the queue-full 503) with an error JSON.
void judge_refusal(Exchange& x, const std::string& body) {
  x.error = "HTTP " + std::to_string(x.status) + ": " + body.substr(0, 200);
  const bool client_side = x.status >= 400 && x.status < 500;
  const bool queue_full = x.status == 503 && body.find("queue_full") != std::string::npos;
  if ((client_side || queue_full) && is_error_json(body)) x.result = ExchangeResult::Rejected;
  else if (x.status >= 500) x.result = ExchangeResult::ServerError;
  else x.result = ExchangeResult::Dropped;  // a 4xx without an error JSON: a broken answer
}

}  // namespace

Exchange exchange(const std::string& base_url, const std::string& path, const json& body, const ExchangeOptions& o) {
  Exchange x;
  httplib::Client cli(base_url);
  set_timeouts(cli, o.read_timeout_s);
  if (o.slow_read_pause_s > 0)
    cli.set_socket_options([](int sock) {
      const int small = 4096;
      ::setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    });
  const bool stream = body.value("stream", false);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.set_header("Content-Type", "application/json");
  if (stream) req.set_header("Accept", "text/event-stream");
  req.body = body.dump();

  std::string raw;  // the body of a non-streamed answer, or of an error
  SseParser sse;
  StreamAssembler acc;
  std::string stream_error;
  bool closed_on_purpose = false;
  const Clock::time_point t0 = Clock::now();
  req.response_handler = [&](const httplib::Response& res) {
    x.status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (o.slow_read_pause_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.slow_read_pause_s));
    if (!stream || x.status != 200) {
      raw.append(data, n);
      return true;
    }
    for (const std::string& ev : sse.feed(data, n)) {
      if (!acc.add(ev, &stream_error)) return false;
      if (x.ttft_s < 0 && ev.find("\"choices\":[{") != std::string::npos) x.ttft_s = since(t0);
      if (o.disconnect_after_chunks > 0 && int(acc.chunks()) >= o.disconnect_after_chunks) {
        closed_on_purpose = true;
        return false;
      }
    }
    return true;
  };
  const httplib::Result res = cli.send(req);
  x.latency_s = since(t0);
  x.chunks = acc.chunks();
  if (closed_on_purpose) {
    x.result = ExchangeResult::Disconnected;
    return x;
  }
  if (!stream_error.empty()) {
    x.error = stream_error;
    x.result = stream_error.rfind("an error", 0) == 0 ? ExchangeResult::ServerError : ExchangeResult::Dropped;
    return x;
  }
  if (!res) {
    x.error = "no complete answer: " + httplib::to_string(res.error());
    x.result = ExchangeResult::Dropped;
    return x;
  }
  if (x.status != 200) {
    judge_refusal(x, raw);
    return x;
  }
  if (stream) {
    if (!acc.done()) {
      x.error = "the stream ended without [DONE] after " + std::to_string(acc.chunks()) + " chunks";
      return x;
    }
    x.canonical = canonical_response(acc.body());
  } else {
    const json j = json::parse(raw, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      x.error = "the answer is not JSON: " + raw.substr(0, 200);
      return x;
    }
    x.canonical = canonical_response(j);
  }
  x.result = ExchangeResult::Answered;
  return x;
}

Exchange post_expecting_client_error(const std::string& base_url, const std::string& path, const std::string& raw,
                                     double read_timeout_s) {
  Exchange x;
  httplib::Client cli(base_url);
  set_timeouts(cli, read_timeout_s);
  const Clock::time_point t0 = Clock::now();
  const httplib::Result res = cli.Post(path, raw, "application/json");
  x.latency_s = since(t0);
  if (!res) {
    x.error = "no answer: " + httplib::to_string(res.error());
    return x;
  }
  x.status = res->status;
  if (x.status == 200) {
    x.result = ExchangeResult::ServerError;  // accepted what must be refused
    x.error = "HTTP 200 to a body that must be refused: " + res->body.substr(0, 120);
    return x;
  }
  judge_refusal(x, res->body);
  if (x.status == 503) x.result = ExchangeResult::ServerError;  // a bad body is never a queue problem
  return x;
}

}  // namespace pypto::bench
