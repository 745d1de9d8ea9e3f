#pragma once
// A cache of recent BPE results keyed by the word's bytes. The tokenizer is one immutable object
// shared by all HTTP threads, so the cache is split into shards, each behind its own mutex:
// threads rarely touch the same shard, and a full shard is simply emptied (words repeat within a
// text, so a crude policy keeps most of the benefit without LRU bookkeeping).
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pypto {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 64;  // longer words rarely repeat
  static constexpr size_t kShards = 32;
  static constexpr size_t kEntriesPerShard = 4096;

  // Appends the cached ids of `word` to `out` and returns true, or returns false on a miss.
  bool lookup(std::string_view word, size_t hash, std::vector<int32_t>& out) const;
  void store(std::string_view word, size_t hash, const int32_t* ids, size_t n) const;

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  struct Shard {
    std::mutex mu;
    std::unordered_map<std::string, std::vector<int32_t>, Hash, std::equal_to<>> map;
  };
  // Mutable: caching does not change what the tokenizer computes.
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace pypto
