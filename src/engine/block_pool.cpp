#include "engine/block_pool.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

BlockPool::BlockPool(int32_t num_blocks, bool enable_caching)
    : blocks_(size_t(std::max(num_blocks, 0))), enable_caching_(enable_caching) {
  if (num_blocks < 1) fail("KV cache must have at least 1 block, got ", num_blocks);
  for (int32_t i = 0; i < num_blocks; ++i) {
    blocks_[size_t(i)].block_id = i;
    free_queue_.append(&blocks_[size_t(i)]);
  }
}

std::vector<KVCacheBlock*> BlockPool::get_new_blocks(int32_t n) {
  PYPTO_ASSERT(n >= 0 && n <= num_free_blocks(), "asked for ", n, " blocks with ", num_free_blocks(), " free");
  std::vector<KVCacheBlock*> out;
  out.reserve(size_t(n));
  for (int32_t i = 0; i < n; ++i) {
    KVCacheBlock* b = free_queue_.popleft();
    PYPTO_ASSERT(b->ref_cnt == 0, "free block ", b->block_id, " has ref_cnt ", b->ref_cnt);
    if (b->block_hash) evict_cached(b);
    b->ref_cnt = 1;
    ++b->generation;
    out.push_back(b);
  }
  return out;
}

std::vector<KVCacheBlock*> BlockPool::find_cached_blocks(const BlockHash& hash, std::span<const int32_t> tokens,
                                                         std::span<const KVCacheBlock* const> parents) const {
  std::vector<KVCacheBlock*> out;
  auto it = cached_.find(hash);
  if (it == cached_.end()) return out;
  for (KVCacheBlock* b : it->second) {
    bool parent_ok = false;
    for (const KVCacheBlock* p : parents)
      if (b->parent == p && (!p || b->parent_generation == p->generation)) parent_ok = true;
    if (!parent_ok) continue;
    if (!std::equal(b->token_ids.begin(), b->token_ids.end(), tokens.begin(), tokens.end())) continue;
    out.push_back(b);
  }
  return out;
}

KVCacheBlock* BlockPool::find_cached_block(const BlockHash& hash, std::span<const int32_t> tokens,
                                           const KVCacheBlock* parent) const {
  const std::vector<KVCacheBlock*> found = find_cached_blocks(hash, tokens, std::span<const KVCacheBlock* const>(&parent, 1));
  return found.empty() ? nullptr : found.front();
}

void BlockPool::touch(std::span<KVCacheBlock* const> blocks) {
  for (KVCacheBlock* b : blocks) {
    if (b->ref_cnt == 0) free_queue_.remove(b);
    ++b->ref_cnt;
  }
}

void BlockPool::free_blocks(std::span<KVCacheBlock* const> ordered_blocks) {
  for (KVCacheBlock* b : ordered_blocks) {
    PYPTO_ASSERT(b->ref_cnt > 0, "double free of block ", b->block_id);
    if (--b->ref_cnt == 0) free_queue_.append(b);
  }
}

void BlockPool::cache_full_block(KVCacheBlock* block, const BlockHash& hash,
                                 std::span<const int32_t> tokens, const KVCacheBlock* parent) {
  if (!enable_caching_) return;
  PYPTO_ASSERT(!block->block_hash, "block ", block->block_id, " is already cached");
  PYPTO_ASSERT(block->ref_cnt > 0, "publishing free block ", block->block_id);
  block->block_hash = hash;
  block->token_ids.assign(tokens.begin(), tokens.end());
  block->parent = parent;
  block->parent_generation = parent ? parent->generation : 0;
  cached_[hash].push_back(block);
  ++num_cached_;
}

void BlockPool::evict_cached(KVCacheBlock* block) {
  auto it = cached_.find(*block->block_hash);
  PYPTO_ASSERT(it != cached_.end(), "cached block ", block->block_id, " missing from the hash map");
  auto& list = it->second;
  auto pos = std::find(list.begin(), list.end(), block);
  PYPTO_ASSERT(pos != list.end(), "cached block ", block->block_id, " missing under its hash");
  list.erase(pos);
  if (list.empty()) cached_.erase(it);
  block->block_hash.reset();
  block->token_ids.clear();
  block->parent = nullptr;
  block->parent_generation = 0;
  --num_cached_;
}

bool BlockPool::reset_prefix_cache() {
  if (num_free_blocks() != num_blocks()) return false;
  for (KVCacheBlock& b : blocks_)
    if (b.block_hash) evict_cached(&b);
  return true;
}

}  // namespace pypto
