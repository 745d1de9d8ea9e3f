#include "engine/kv_cache_block.h"

#include "core/error.h"

namespace pypto {

FreeBlockQueue::FreeBlockQueue() {
  head_.block_id = tail_.block_id = -1;
  head_.next_free = &tail_;
  tail_.prev_free = &head_;
}

KVCacheBlock* FreeBlockQueue::popleft() {
  PYPTO_ASSERT(size_ > 0, "popleft on an empty free queue");
  KVCacheBlock* b = head_.next_free;
  remove(b);
  return b;
}

void FreeBlockQueue::remove(KVCacheBlock* b) {
  PYPTO_ASSERT(contains(b), "block ", b->block_id, " is not in the free queue");
  b->prev_free->next_free = b->next_free;
  b->next_free->prev_free = b->prev_free;
  b->prev_free = b->next_free = nullptr;
  --size_;
}

void FreeBlockQueue::append(KVCacheBlock* b) {
  PYPTO_ASSERT(!contains(b), "block ", b->block_id, " is already in the free queue");
  b->prev_free = tail_.prev_free;
  b->next_free = &tail_;
  tail_.prev_free->next_free = b;
  tail_.prev_free = b;
  ++size_;
}

std::vector<int32_t> FreeBlockQueue::block_ids() const {
  std::vector<int32_t> out;
  out.reserve(size_);
  for (const KVCacheBlock* b = head_.next_free; b != &tail_; b = b->next_free) out.push_back(b->block_id);
  return out;
}

}  // namespace pypto
