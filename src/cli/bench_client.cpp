#include "cli/bench_client.h"

#include <httplib.h>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pypto::bench {

using Clock = std::chrono::steady_clock;

void parse_url(const std::string& url, std::string& base, std::string& prefix) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos || (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0))
    fail("--url '", url, "': expected http://host:port");
  const size_t slash = url.find('/', scheme + 3);
  base = url.substr(0, slash);
  prefix = slash == std::string::npos ? "" : url.substr(slash);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  if (base.size() <= scheme + 3) fail("--url '", url, "': no host");
}

std::vector<std::string> SseParser::feed(const char* data, size_t n) {
  buf_.append(data, n);
  std::vector<std::string> events;
  for (;;) {
    // An event ends at a blank line ("\n\n" or "\r\n\r\n").
    size_t end = buf_.find("\n\n");
    size_t crlf = buf_.find("\r\n\r\n");
    size_t len = 2;
    if (crlf != std::string::npos && (end == std::string::npos || crlf < end)) end = crlf, len = 4;
    if (end == std::string::npos) break;
    std::string block = buf_.substr(0, end);
    buf_.erase(0, end + len);
    std::string payload;
    bool any = false;
    size_t pos = 0;
    while (pos <= block.size()) {
      size_t nl = block.find('\n', pos);
      std::string line = block.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.rfind("data:", 0) == 0) {
        std::string v = line.substr(5);
        if (!v.empty() && v[0] == ' ') v.erase(0, 1);
        if (any) payload += '\n';
        payload += v;
        any = true;
      }
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
    if (any) events.push_back(std::move(payload));
  }
  return events;
}

ChunkInfo parse_chunk(const std::string& data) {
  ChunkInfo c;
  if (data == "[DONE]") {
    c.done = true;
    return c;
  }
  nlohmann::json j = nlohmann::json::parse(data, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) fail("stream chunk is not a JSON object: ", data.substr(0, 200));
  if (j.contains("error")) fail("server error in stream: ", j["error"].dump().substr(0, 300));
  if (auto it = j.find("choices"); it != j.end() && it->is_array() && !it->empty()) {
    c.has_choices = true;
    const auto& ch = (*it)[0];
    if (auto t = ch.find("text"); t != ch.end() && t->is_string()) c.text = t->get<std::string>();
    else if (auto d = ch.find("delta"); d != ch.end() && d->is_object() && d->contains("content") &&
                                         (*d)["content"].is_string())
      c.text = (*d)["content"].get<std::string>();
  }
  if (auto u = j.find("usage"); u != j.end() && u->is_object() && u->contains("completion_tokens"))
    c.completion_tokens = (*u)["completion_tokens"].get<int64_t>();
  return c;
}

std::string completion_body(const Endpoint& ep, const std::string& prompt, int64_t max_tokens) {
  nlohmann::ordered_json b;
  if (!ep.model.empty()) b["model"] = ep.model;
  const bool chat = ep.path.find("chat") != std::string::npos;
  if (chat) b["messages"] = nlohmann::ordered_json::array({{{"role", "user"}, {"content", prompt}}});
  else b["prompt"] = prompt;
  b["max_tokens"] = max_tokens;
  b["temperature"] = 0.0;
  b["ignore_eos"] = true;
  b["stream"] = true;
  b["stream_options"] = {{"include_usage", true}};
  return b.dump();
}

RequestTiming send_completion(const Endpoint& ep, const std::string& prompt, int64_t prompt_len,
                              int64_t max_tokens, Clock::time_point start) {
  RequestTiming r;
  r.prompt_len = prompt_len;
  httplib::Client cli(ep.base_url);
  // A request queued behind others' 32K-token prefills on a CPU can wait long for its first byte:
  // 6 hours, as vLLM's benchmark client allows.
  cli.set_read_timeout(6 * 3600, 0);
  cli.set_connection_timeout(10, 0);
  cli.set_keep_alive(false);

  httplib::Request req;
  req.method = "POST";
  req.path = ep.path;
  req.set_header("Content-Type", "application/json");
  req.set_header("Accept", "text/event-stream");
  req.body = completion_body(ep, prompt, max_tokens);

  SseParser sse;
  std::string error_body;
  int status = 0;
  bool first = false;
  int64_t chunks = 0;
  Clock::time_point st, recent;
  req.response_handler = [&](const httplib::Response& res) {
    status = res.status;
    return true;
  };
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    if (status != 200) {
      error_body.append(data, n);
      return true;
    }
    try {
      for (const std::string& ev : sse.feed(data, n)) {
        ChunkInfo c = parse_chunk(ev);
        if (c.done) continue;
        if (c.has_choices) {
          const Clock::time_point now = Clock::now();
          if (!first) {
            first = true;
            r.ttft_s = std::chrono::duration<double>(now - st).count();
          } else {
            r.itl_s.push_back(std::chrono::duration<double>(now - recent).count());
          }
          recent = now;
          if (!c.text.empty()) chunks++;
        }
        if (c.completion_tokens >= 0) r.output_tokens = c.completion_tokens;
      }
    } catch (const std::exception& e) {
      r.error = e.what();
      return false;
    }
    return true;
  };
  st = Clock::now();
  r.send_s = std::chrono::duration<double>(st - start).count();
  httplib::Result res = cli.send(req);
  if (!r.error.empty()) return r;
  if (!res) {
    r.error = "HTTP request to " + ep.base_url + ep.path + " failed: " + httplib::to_string(res.error());
    return r;
  }
  if (status != 200) {
    r.error = "HTTP " + std::to_string(status) + " from " + ep.path + ": " + error_body.substr(0, 300);
    return r;
  }
  if (!first) {
    r.error = "the stream ended without any chunk carrying choices";
    return r;
  }
  r.latency_s = std::chrono::duration<double>(recent - st).count();
  if (r.output_tokens <= 0) r.output_tokens = chunks;  // no usage chunk: count non-empty chunks
  r.success = true;
  return r;
}

}  // namespace pypto::bench
