#include "sampling/stop_checker.h"

#include <algorithm>

namespace pypto {

StopChecker::StopChecker(std::vector<std::string> stop_strings) : stops_(std::move(stop_strings)) {
  stops_.erase(std::remove(stops_.begin(), stops_.end(), std::string()), stops_.end());
}

StopChecker::Result StopChecker::append(std::string_view new_text) {
  Result r;
  if (stopped_) return r;
  pending_.append(new_text);
  // Earliest match wins; at the same position the longer stop string (it is the one OpenAI's
  // left-to-right scan would report, and trimming is the same either way).
  size_t best_pos = std::string::npos;
  for (size_t i = 0; i < stops_.size(); ++i) {
    const size_t pos = pending_.find(stops_[i]);
    if (pos == std::string::npos) continue;
    if (pos < best_pos || (pos == best_pos && stops_[i].size() > stops_[*r.stop_index].size())) {
      best_pos = pos;
      r.stop_index = i;
    }
  }
  if (r.stop_index) {
    stopped_ = true;
    r.text = pending_.substr(0, best_pos);
    pending_.clear();
    return r;
  }
  // Hold back the longest suffix of pending_ that is a proper prefix of some stop string. The
  // pending text is then always shorter than the longest stop, so the find above stays cheap.
  size_t hold = 0;
  for (const std::string& s : stops_) {
    const size_t max_len = std::min(s.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len)
      if (pending_.compare(pending_.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
  }
  r.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return r;
}

std::string StopChecker::flush() {
  std::string out;
  if (!stopped_) out.swap(pending_);
  return out;
}

}  // namespace pypto
