#include "tokenizer/word_cache.h"

namespace pypto {

bool WordCache::lookup(std::string_view word, size_t hash, std::vector<int32_t>& out) const {
  Shard& s = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.map.find(word);
  if (it == s.map.end()) return false;
  out.insert(out.end(), it->second.begin(), it->second.end());
  return true;
}

void WordCache::store(std::string_view word, size_t hash, const int32_t* ids, size_t n) const {
  Shard& s = shards_[hash % kShards];
  std::lock_guard<std::mutex> lock(s.mu);
  if (s.map.size() >= kEntriesPerShard) s.map.clear();
  s.map.emplace(std::string(word), std::vector<int32_t>(ids, ids + n));
}

}  // namespace pypto
