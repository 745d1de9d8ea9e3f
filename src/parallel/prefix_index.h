#pragma once
// The router's picture of one replica's prefix cache, for prefix_affinity routing: the chained
// hashes of every full block of the prompts routed to that replica, least recently used evicted
// beyond a cap. It is an estimate kept on the router's side (the replica's own cache lives on its
// engine thread and may have evicted blocks since), which is all a routing hint needs.
#include <cstdint>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace pypto {

class PrefixIndex {
 public:
  // `block_size`: the engine's KV block size (only whole blocks are cached); `max_blocks`: the
  // number of block hashes kept (about the replica's KV capacity in blocks).
  PrefixIndex(int32_t block_size, size_t max_blocks);

  // Tokens of the longest prefix of `tokens` made of indexed blocks (a multiple of block_size).
  int64_t match(const std::vector<int32_t>& tokens) const;
  // Indexes every full block of `tokens` (marking them most recently used).
  void insert(const std::vector<int32_t>& tokens);

  size_t size() const;

 private:
  std::vector<uint64_t> block_hashes(const std::vector<int32_t>& tokens) const;

  int32_t block_size_;
  size_t max_blocks_;
  mutable std::mutex mu_;
  std::list<uint64_t> lru_;  // front = most recent
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> map_;
};

}  // namespace pypto
