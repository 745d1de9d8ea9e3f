#include "engine/spec_throttle.h"

#include <algorithm>

namespace pypto {

int32_t SpecThrottle::next_k() {
  if (paused_ > 0) {
    --paused_;
    return 0;
  }
  return k_;
}

void SpecThrottle::observe(int32_t drafted, int32_t accepted) {
  if (drafted <= 0) return;
  if (accepted > 0) {
    misses_ = 0;
    next_pause_ = kFirstPause;
    k_ = std::min(max_k_, std::max(k_, accepted + 1));
    return;
  }
  k_ = std::max(1, k_ / 2);
  if (++misses_ >= kMaxMisses) {
    misses_ = 0;
    paused_ = next_pause_;
    next_pause_ = std::min(kMaxPause, next_pause_ * 2);
  }
}

}  // namespace pypto
