#include "core/arena.h"

#include "core/error.h"

namespace pypto {
namespace {
size_t align_up(size_t v, size_t a) { return (v + a - 1) & ~(a - 1); }
}  // namespace

Arena::Arena(size_t capacity) : main_(align_up(capacity, 4096)) {}

void* Arena::alloc(size_t bytes, size_t align) {
  PYPTO_ASSERT(align && (align & (align - 1)) == 0 && align <= 4096, "alignment ", align);
  size_t start = align_up(offset_, align);
  if (start + bytes <= main_.size()) {
    used_ += start + bytes - offset_;
    offset_ = start + bytes;
    if (used_ > high_water_) high_water_ = used_;
    return main_.data() + start;
  }
  // Spill: a block of its own (page-aligned), or the rest of the current spill block.
  if (!spill_.empty()) {
    size_t s = align_up(spill_offset_, align);
    if (s + bytes <= spill_.back().size()) {
      used_ += s + bytes - spill_offset_;
      spill_offset_ = s + bytes;
      if (used_ > high_water_) high_water_ = used_;
      return spill_.back().data() + s;
    }
  }
  size_t block = align_up(bytes > (1u << 20) ? bytes : (1u << 20), 4096);
  spill_.emplace_back(block);
  spill_offset_ = bytes;
  used_ += bytes + align;  // count alignment slack so the regrown block surely fits
  if (used_ > high_water_) high_water_ = used_;
  return spill_.back().data();
}

void Arena::reset() {
  if (!spill_.empty()) {
    spill_.clear();
    main_ = AlignedBuffer();
    main_ = AlignedBuffer(align_up(high_water_ + high_water_ / 8, 4096));
    ++grow_count_;
  }
  offset_ = 0;
  spill_offset_ = 0;
  used_ = 0;
}

}  // namespace pypto
