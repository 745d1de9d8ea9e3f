#pragma once
// The frame every streamed OpenAI answer shares (chat and completions): SSE headers, the opening
// chunks, one batch of chunks per engine step, then, with stream_options.include_usage, a chunk
// with no choices and the usage, and "data: [DONE]". The generation is aborted as soon as the
// client can no longer be written to.
#include <chrono>
#include <functional>
#include <memory>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "serve/generation.h"

namespace pypto {

// Writes one SSE event; false when the client is gone.
using SseWrite = std::function<bool(const nlohmann::ordered_json&)>;

struct SseStream {
  std::shared_ptr<void> job;  // kept alive until the stream ends (owns `gen`)
  Generation* gen = nullptr;
  std::chrono::steady_clock::time_point arrival;
  bool include_usage = false;
  nlohmann::ordered_json usage_base;  // {id, object, created, model} of the usage chunk
  std::function<bool(const SseWrite&)> opening;                                  // first chunks
  std::function<bool(std::vector<ChoiceDelta>&, const SseWrite&)> on_deltas;  // each step's
};

// The frame's fields taken from a request's job (gen, arrival, include_usage); the caller sets
// opening and on_deltas.
template <class Job>
SseStream sse_stream_for(const std::shared_ptr<Job>& job, nlohmann::ordered_json usage_base) {
  SseStream st;
  st.job = job;
  st.gen = job->gen.get();
  st.arrival = job->arrival;
  st.include_usage = job->include_usage;
  st.usage_base = std::move(usage_base);
  return st;
}

void stream_sse(httplib::Response& res, ServerState& s, SseStream stream);

}  // namespace pypto
