#pragma once
// Server-sent events framing as OpenAI streams use it: each event is one "data: <json>" line
// followed by a blank line; the stream ends with "data: [DONE]".
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace pypto {

inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

std::string sse_event(const nlohmann::ordered_json& payload);

// Reassembles events from bytes that arrive in arbitrary pieces (tests and clients): returns the
// data payload of every event completed by `bytes` ("[DONE]" included, comments skipped).
class SseParser {
 public:
  std::vector<std::string> feed(std::string_view bytes);

 private:
  std::string buffer_;
  std::string data_;
};

}  // namespace pypto
