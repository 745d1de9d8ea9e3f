#pragma once
// Per-request adaptive speculation ("never slower"). A verify step computes k + 1 rows where plain
// decoding computes one; on a CPU that costs a little more than a one-row step (the weights are
// read once either way), so drafts that keep being rejected make decode slower. The throttle
// shortens k and then pauses speculation for a request whose drafts are rejected:
//  - every verify with no accepted draft halves k (down to 1) and counts a miss; kMaxMisses misses
//    in a row pause drafting for `pause` steps, and the pause doubles (8, 16, .. 256 steps) each
//    time it is taken again without an acceptance in between;
//  - a verify that accepts a drafts resets misses and the pause and sets k to max(k, a + 1),
//    capped at the configured k: a fully accepted run grows k by one step at a time.
// A step with no proposal (no n-gram match) costs nothing and changes nothing.
#include <cstdint>

namespace pypto {

class SpecThrottle {
 public:
  static constexpr int32_t kMaxMisses = 4;
  static constexpr int32_t kFirstPause = 8;
  static constexpr int32_t kMaxPause = 256;

  explicit SpecThrottle(int32_t max_k = 0) : max_k_(max_k), k_(max_k) {}

  // Drafts to ask for this step (0: paused). Counts a paused step down.
  int32_t next_k();
  // The outcome of a verify step: `drafted` tokens proposed, `accepted` of them accepted.
  void observe(int32_t drafted, int32_t accepted);

  // What next_k() will return, without counting a paused step (a drafter's look-ahead).
  int32_t peek_k() const { return paused_ > 0 ? 0 : k_; }
  int32_t k() const { return k_; }
  int32_t paused_steps() const { return paused_; }

 private:
  int32_t max_k_;
  int32_t k_;
  int32_t misses_ = 0;
  int32_t paused_ = 0;
  int32_t next_pause_ = kFirstPause;
};

}  // namespace pypto
