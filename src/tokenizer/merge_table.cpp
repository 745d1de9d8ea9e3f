#include "tokenizer/merge_table.h"

namespace pypto {

MergeTable::MergeTable(size_t expected) {
  size_t cap = 16;
  while (cap < expected * 2) cap *= 2;  // load factor <= 1/2 keeps probe runs short
  entries_.assign(cap, Entry{kEmpty, {0, 0}});
  mask_ = cap - 1;
  shift_ = 64 - __builtin_ctzll(cap);
}

bool MergeTable::insert(int32_t left, int32_t right, Merge merge) {
  if ((size_ + 1) * 2 > entries_.size()) grow();
  const uint64_t key = pack(left, right);
  size_t i = slot(key);
  for (; entries_[i].key != kEmpty; i = (i + 1) & mask_) {
    if (entries_[i].key == key) return false;
  }
  entries_[i] = Entry{key, merge};
  ++size_;
  return true;
}

void MergeTable::grow() {
  std::vector<Entry> old = std::move(entries_);
  MergeTable bigger(old.size());
  for (const Entry& e : old) {
    if (e.key != kEmpty) bigger.insert(static_cast<int32_t>(e.key >> 32), static_cast<int32_t>(e.key & 0xFFFFFFFF), e.merge);
  }
  *this = std::move(bigger);
}

}  // namespace pypto
