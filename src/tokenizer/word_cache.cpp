#include "tokenizer/word_cache.h"

#include <cstring>

namespace pypto {

WordCache::WordCache() {
  for (Shard& s : shards_) {
    s.slots.resize(kSlots);
    s.arena.reserve(kArenaBytes);
  }
}

bool WordCache::lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const {
  hash |= 1;
  Shard& s = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  for (size_t i = (hash >> 32) & (kSlots - 1);; i = (i + 1) & (kSlots - 1)) {
    const Slot& slot = s.slots[i];
    if (slot.hash == 0) return false;
    if (slot.hash != hash || slot.key_len != word.size()) continue;
    const char* p = s.arena.data() + slot.offset;
    if (std::memcmp(p, word.data(), word.size()) != 0) continue;
    const size_t at = out.size();
    out.resize(at + slot.n_ids);
    std::memcpy(out.data() + at, p + slot.key_len, slot.n_ids * sizeof(int32_t));
    return true;
  }
}

void WordCache::store(std::string_view word, uint64_t hash, const int32_t* ids, size_t n) const {
  hash |= 1;
  Shard& s = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  const size_t need = word.size() + n * sizeof(int32_t);
  if (s.entries >= kMaxEntries || s.arena.size() + need > kArenaBytes) {
    std::fill(s.slots.begin(), s.slots.end(), Slot{});
    s.arena.clear();
    s.entries = 0;
  }
  size_t i = (hash >> 32) & (kSlots - 1);
  for (;; i = (i + 1) & (kSlots - 1)) {
    const Slot& slot = s.slots[i];
    if (slot.hash == 0) break;
    // Another thread may have stored the same word meanwhile.
    if (slot.hash == hash && slot.key_len == word.size() &&
        std::memcmp(s.arena.data() + slot.offset, word.data(), word.size()) == 0) {
      return;
    }
  }
  Slot& slot = s.slots[i];
  slot.hash = hash;
  slot.offset = static_cast<uint32_t>(s.arena.size());
  slot.key_len = static_cast<uint16_t>(word.size());
  slot.n_ids = static_cast<uint16_t>(n);
  s.arena.append(word);
  s.arena.append(reinterpret_cast<const char*>(ids), n * sizeof(int32_t));
  ++s.entries;
}

}  // namespace pypto
