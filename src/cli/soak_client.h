#pragma once
// `bench soak`: one HTTP exchange of a catalogue entry, streamed or not, as an ordinary, a slow
// or a vanishing client would hold it, and what came back in the terms the soak judges it by.
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/soak_catalogue.h"

namespace pypto::bench {

struct ExchangeOptions {
  double read_timeout_s = 300;   // bounds every exchange, so the soak always ends
  // A slow reader: a small receive buffer and this pause after each piece read, so the server's
  // writes block on a full socket.
  double slow_read_pause_s = 0;
  // > 0: close the connection after this many stream chunks (a client that vanishes mid-stream).
  int disconnect_after_chunks = 0;
};

enum class ExchangeResult {
  Answered,      // a complete answer: 200 with a body (stream: through [DONE])
  Rejected,      // a well-formed refusal: 4xx/503 with an error JSON (e.g. queue full)
  ServerError,   // 5xx other than a queue-full 503, or an error inside a 200 stream
  Dropped,       // no response, a connection reset, a cut stream, or a body that is not JSON
  Disconnected,  // we closed it on purpose (disconnect_after_chunks) after reading chunks
};
const char* exchange_result_name(ExchangeResult r);

struct Exchange {
  ExchangeResult result = ExchangeResult::Dropped;
  int status = 0;
  std::string error;           // why, when not Answered
  nlohmann::json canonical;    // canonical_response of the answer (Answered only)
  double ttft_s = -1;          // streams: to the first chunk with choices
  double latency_s = 0;        // to the end of the answer
  size_t chunks = 0;
};

// Sends `body` to base_url + path (streamed when body["stream"] is true).
Exchange exchange(const std::string& base_url, const std::string& path, const nlohmann::json& body,
                  const ExchangeOptions& o);

// A raw POST whose body is `raw` (not necessarily JSON); the answer must be a 4xx carrying an
// error JSON ({"error": {"message": ...}}): Rejected when it is, else ServerError / Dropped with
// the reason in error.
Exchange post_expecting_client_error(const std::string& base_url, const std::string& path, const std::string& raw,
                                     double read_timeout_s);

}  // namespace pypto::bench
