#pragma once
// One streaming request of `bench serve` against an OpenAI-compatible server, timed on the client
// exactly as vLLM's benchmark client does (see bench_stats.h for the definitions). Thread-safe:
// each call opens its own connection.
#include <chrono>
#include <cstdint>
#include <string>

#include "cli/bench_stats.h"

namespace pypto::bench {

struct Endpoint {
  std::string base_url;  // http://host:port
  std::string path = "/v1/completions";
  std::string model;     // "model" field of each request (empty: omitted)
};

// Splits "http://host:port[/prefix]" into base ("http://host:port") and path prefix; Error
// naming the URL when it is not http(s)://host[:port].
void parse_url(const std::string& url, std::string& base, std::string& prefix);

// Incremental parser of a text/event-stream body: feed() bytes as they arrive, get back each
// complete event's data payload ("data: …" lines joined by newlines).
class SseParser {
 public:
  std::vector<std::string> feed(const char* data, size_t n);

 private:
  std::string buf_;
};

// What a streamed completion chunk carries, as the benchmark reads it.
struct ChunkInfo {
  bool has_choices = false;  // a non-empty "choices" array (text may be empty)
  bool done = false;         // the "[DONE]" sentinel
  int64_t completion_tokens = -1;  // usage.completion_tokens when present
  std::string text;
};
// Error naming the payload when it is not JSON (or not "[DONE]").
ChunkInfo parse_chunk(const std::string& data);

// The request body of one streaming completion with ignore_eos (so the output has max_tokens).
std::string completion_body(const Endpoint& ep, const std::string& prompt, int64_t max_tokens);

// Sends one request; `start` is the benchmark's time origin (send_s is measured from it).
RequestTiming send_completion(const Endpoint& ep, const std::string& prompt, int64_t prompt_len,
                              int64_t max_tokens, std::chrono::steady_clock::time_point start);

}  // namespace pypto::bench
