#include "serve/sse.h"

namespace pypto {

std::string sse_event(const nlohmann::ordered_json& payload) {
  // dump() never emits a raw newline (control characters are escaped), so one data line suffices.
  std::string out = "data: ";
  out += payload.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  out += "\n\n";
  return out;
}

std::vector<std::string> SseParser::feed(std::string_view bytes) {
  std::vector<std::string> events;
  buffer_ += bytes;
  size_t start = 0;
  for (;;) {
    const size_t nl = buffer_.find('\n', start);
    if (nl == std::string::npos) break;
    std::string_view line(buffer_.data() + start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    start = nl + 1;
    if (line.empty()) {  // end of event
      if (!data_.empty()) events.push_back(std::move(data_));
      data_.clear();
      continue;
    }
    if (line.front() == ':') continue;  // comment
    if (line.substr(0, 5) == "data:") {
      std::string_view v = line.substr(5);
      if (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      if (!data_.empty()) data_ += '\n';
      data_ += v;
    }
  }
  buffer_.erase(0, start);
  return events;
}

}  // namespace pypto
