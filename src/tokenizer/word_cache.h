#pragma once
// A cache of recent BPE results keyed by the word's bytes. The tokenizer is one immutable object
// shared by all HTTP threads, so the cache is split into shards, each behind its own mutex:
// threads rarely touch the same shard. Each shard is a flat open-addressing table over one byte
// arena (key bytes, then the ids), so a lookup costs about one cache miss; a full shard is
// simply emptied (words repeat within a text, so this crude policy keeps most of the benefit
// without LRU bookkeeping).
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace pypto {

class WordCache {
 public:
  static constexpr size_t kMaxWordBytes = 64;  // longer words rarely repeat

  WordCache();
  // Appends the cached ids of `word` to `out` and returns true, or returns false on a miss.
  bool lookup(std::string_view word, uint64_t hash, std::vector<int32_t>& out) const;
  void store(std::string_view word, uint64_t hash, const int32_t* ids, size_t n) const;

 private:
  static constexpr size_t kShards = 16;
  static constexpr size_t kSlots = 8192;                    // per shard, a power of two
  static constexpr size_t kMaxEntries = kSlots / 2;         // keeps probe runs short
  static constexpr size_t kArenaBytes = kMaxEntries * 48;  // typical word + ids

  struct Slot {
    uint64_t hash = 0;  // 0 marks an empty slot (stored hashes have their low bit set)
    uint32_t offset = 0;
    uint16_t key_len = 0;
    uint16_t n_ids = 0;
  };
  struct Shard {
    std::mutex mu;
    std::vector<Slot> slots;
    std::string arena;
    size_t entries = 0;
  };
  // Mutable: caching does not change what the tokenizer computes.
  mutable std::array<Shard, kShards> shards_;
};

}  // namespace pypto
