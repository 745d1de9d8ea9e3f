#include "engine/state_snapshots.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

StateSnapshots::StateSnapshots(const BlockPool& pool, int32_t entries, int32_t block_size, int64_t interval)
    : pool_(pool), block_size_(block_size), interval_(interval), entries_(size_t(std::max(entries, 0))) {
  PYPTO_ASSERT(entries >= 1 && block_size >= 1, "state snapshots: ", entries, " entries, block size ", block_size);
  PYPTO_ASSERT(interval >= 0 && interval % block_size == 0, "state snapshot interval ", interval, " is not a multiple of ",
               block_size);
}

bool StateSnapshots::stale(const Entry& e) const {
  if (e.state != State::Valid) return false;
  const KVCacheBlock& b = pool_.block(e.block_id);
  return b.generation != e.generation || !b.block_hash;
}

int32_t StateSnapshots::find(const KVCacheBlock& block) const {
  auto it = by_block_.find(block.block_id);
  if (it == by_block_.end()) return -1;
  const Entry& e = entries_[size_t(it->second)];
  PYPTO_ASSERT(e.state == State::Valid && e.block_id == block.block_id, "snapshot index out of step");
  return stale(e) ? -1 : it->second;
}

int32_t StateSnapshots::num_valid() const {
  int32_t n = 0;
  for (const Entry& e : entries_) n += e.state == State::Valid && !stale(e);
  return n;
}

void StateSnapshots::release(int32_t i) {
  Entry& e = entries_[size_t(i)];
  if (e.state == State::Valid) {
    auto it = by_block_.find(e.block_id);
    if (it != by_block_.end() && it->second == i) by_block_.erase(it);
  }
  e = Entry{};
}

int32_t StateSnapshots::take() {
  int32_t lru = -1;
  for (int32_t i = 0; i < entries(); ++i) {
    const Entry& e = entries_[size_t(i)];
    if (e.state == State::Free || (stale(e) && !e.pinned)) {
      release(i);
      return i;
    }
    if (e.state == State::Valid && !e.pinned && (lru < 0 || e.last_used < entries_[size_t(lru)].last_used)) lru = i;
  }
  if (lru >= 0) {
    release(lru);
    ++stats_.evicted;
  }
  return lru;
}

std::vector<StateSave> StateSnapshots::plan(int64_t start, int64_t n) {
  PYPTO_ASSERT(start >= 0 && n >= 1, "state snapshot plan for [", start, ", +", n, ")");
  const int64_t end = start + n, bs = block_size_;
  std::vector<int64_t> positions;
  if (interval_ > 0)
    for (int64_t p = (start / interval_ + 1) * interval_; p <= end; p += interval_) positions.push_back(p);
  if (const int64_t last = end / bs * bs; last > start && (positions.empty() || positions.back() != last))
    positions.push_back(last);
  std::sort(positions.begin(), positions.end());
  std::vector<StateSave> out;
  for (int64_t p : positions) {
    const int32_t e = take();
    if (e < 0) {
      ++stats_.skipped;
      continue;
    }
    entries_[size_t(e)].state = State::Pending;
    out.push_back({p, e});
  }
  return out;
}

void StateSnapshots::commit(const std::string& req_id, std::span<const StateSave> saves,
                            std::span<KVCacheBlock* const> blocks, int64_t num_prompt_tokens) {
  for (const StateSave& v : saves) {
    Entry& e = entries_[size_t(v.entry)];
    PYPTO_ASSERT(e.state == State::Pending, "state snapshot ", v.entry, " committed but not pending");
    PYPTO_ASSERT(v.position % block_size_ == 0 && v.position / block_size_ >= 1 &&
                     size_t(v.position / block_size_) <= blocks.size(),
                 "state snapshot at position ", v.position, " outside the request's ", blocks.size(), " blocks");
    const KVCacheBlock* b = blocks[size_t(v.position / block_size_ - 1)];
    PYPTO_ASSERT(b->block_hash.has_value(), "state snapshot at position ", v.position, ": block ", b->block_id,
                 " is not published in the prefix cache");
    // A block has one end: an older (stale) entry of the same block id gives way.
    if (auto it = by_block_.find(b->block_id); it != by_block_.end()) release(it->second);
    e.state = State::Valid;
    e.block_id = b->block_id;
    e.generation = b->generation;
    e.last_used = ++clock_;
    by_block_[b->block_id] = v.entry;
    ++stats_.saved;
    const bool replaceable = v.position > num_prompt_tokens && (interval_ == 0 || v.position % interval_ != 0);
    if (!replaceable) continue;
    // The request's previous decode-time snapshot is now of little use (a later turn resumes from
    // this one): first in line for reuse.
    const Latest now{v.entry, e.block_id, e.generation};
    auto [it, fresh] = latest_.try_emplace(req_id, now);
    if (!fresh) {
      Entry& prev = entries_[size_t(it->second.entry)];
      // Unless the entry has since been reused for another prefix.
      if (prev.state == State::Valid && prev.block_id == it->second.block_id && prev.generation == it->second.generation)
        prev.last_used = 0;
      it->second = now;
    }
  }
}

void StateSnapshots::pin(int32_t i) {
  PYPTO_ASSERT(i >= 0 && i < entries() && entries_[size_t(i)].state == State::Valid, "pinning state snapshot ", i);
  Entry& e = entries_[size_t(i)];
  e.pinned = true;
  e.last_used = ++clock_;
  ++stats_.restored;
}

void StateSnapshots::end_step() {
  for (int32_t i = 0; i < entries(); ++i) {
    Entry& e = entries_[size_t(i)];
    if (e.state == State::Pending) release(i);
    e.pinned = false;
  }
}

}  // namespace pypto
