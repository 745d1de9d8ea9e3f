#pragma once
// A per-step bump allocator for activation scratch memory: the forward pass takes every buffer it
// needs from the arena and calls reset() once per step, so the steady state does no malloc.
// If a step needs more than the capacity, the arena spills into extra blocks for that step and
// the next reset() replaces everything with one block of the high-water size: at most a few
// allocations while the workload grows, none after. Not thread-safe (one arena per engine thread).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/memory.h"

namespace pypto {

class Arena {
 public:
  explicit Arena(size_t capacity = 0);

  // `bytes` of uninitialised memory aligned to `align` (a power of two, at most 4096), valid
  // until the next reset().
  void* alloc(size_t bytes, size_t align = 64);
  template <typename T>
  T* alloc_array(size_t n, size_t align = 64) {
    return static_cast<T*>(alloc(n * sizeof(T), align));
  }

  // Frees everything allocated since the last reset; grows to the high-water mark if it spilled.
  void reset();

  size_t used() const { return used_; }              // bytes handed out since reset (incl. padding)
  size_t capacity() const { return main_.size(); }
  size_t high_water() const { return high_water_; }  // largest `used` seen by any step
  size_t grow_count() const { return grow_count_; }  // times the main block was replaced

 private:
  AlignedBuffer main_;
  size_t offset_ = 0;                  // next free byte of main_
  std::vector<AlignedBuffer> spill_;  // blocks used only when main_ ran out during this step
  size_t spill_offset_ = 0;
  size_t used_ = 0, high_water_ = 0, grow_count_ = 0;
};

}  // namespace pypto
