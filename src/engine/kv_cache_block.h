#pragma once
// One physical KV block's metadata, and the free queue that orders free blocks for eviction.
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/block_hash.h"

namespace pypto {

struct KVCacheBlock {
  int32_t block_id = 0;
  int32_t ref_cnt = 0;
  // Bumped each time the block is handed out by get_new_blocks: its KV content may change only
  // then. A child block records its parent's generation, so a parent that was evicted and reused
  // no longer vouches for the child.
  uint64_t generation = 0;

  // Set while the block is published in the prefix cache (it may be free and still cached).
  std::optional<BlockHash> block_hash;
  // What the hash stands for, verified on every hit: the block's tokens and the block holding
  // the previous block of the sequence when this one was computed (null for a first block).
  std::vector<int32_t> token_ids;
  const KVCacheBlock* parent = nullptr;
  uint64_t parent_generation = 0;

  // Intrusive links of FreeBlockQueue (null while not in the queue).
  KVCacheBlock* prev_free = nullptr;
  KVCacheBlock* next_free = nullptr;
};

// Free blocks in eviction order: the head is evicted (reused) first. A hand-written doubly linked
// list through the blocks themselves, because a prefix hit on a free cached block must take it
// out of the middle in O(1). Freed blocks are appended at the tail, so the order is least recently
// used first; a request frees its blocks in reverse so the tail of its sequence (least likely to
// be shared) is evicted before its head.
class FreeBlockQueue {
 public:
  FreeBlockQueue();
  FreeBlockQueue(const FreeBlockQueue&) = delete;
  FreeBlockQueue& operator=(const FreeBlockQueue&) = delete;

  size_t size() const { return size_; }
  bool contains(const KVCacheBlock* b) const { return b->prev_free != nullptr; }
  KVCacheBlock* popleft();
  void remove(KVCacheBlock* b);
  void append(KVCacheBlock* b);
  std::vector<int32_t> block_ids() const;  // head to tail, for tests and debugging

 private:
  KVCacheBlock head_;  // sentinels: never real blocks
  KVCacheBlock tail_;
  size_t size_ = 0;
};

}  // namespace pypto
