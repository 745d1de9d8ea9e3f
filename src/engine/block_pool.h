#pragma once
// BlockPool: the physical KV blocks (ids 0 .. num_blocks-1), their reference counts, the free
// queue in eviction order and the prefix cache (hash -> blocks). It knows nothing of requests or
// scheduling; KVCacheManager decides which blocks a request holds.
//
// Cached blocks are not de-duplicated: when a block fills up and is published we do not look for
// an identical block already in the cache, because block ids handed to a request never change
// (every block table is append-only). Several blocks may therefore share one hash.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/kv_cache_block.h"

namespace pypto {

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, bool enable_caching);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t num_blocks() const { return int32_t(blocks_.size()); }
  // Blocks in the free queue: never used, or freed (possibly still cached and revivable).
  int32_t num_free_blocks() const { return int32_t(free_queue_.size()); }
  // Blocks published in the prefix cache (held or free).
  size_t num_cached_blocks() const { return num_cached_; }
  // Fraction of blocks held by requests.
  double usage() const { return 1.0 - double(num_free_blocks()) / double(num_blocks()); }

  // Pops n blocks from the head of the free queue (least recently used first), evicting any
  // cached hash they carry; each comes back with ref_cnt 1. n must be <= num_free_blocks().
  std::vector<KVCacheBlock*> get_new_blocks(int32_t n);

  // Every cached block with this hash whose tokens equal `tokens` and that was computed right
  // after one of `parents` (each still holding the KV it held then); parents = {nullptr} for a
  // sequence's first block. If every parent holds the KV of our prefix, so does every block
  // returned: never a block whose KV belongs to different content, whatever the hash function.
  // Several parents arise because identical blocks computed in the same step are all published
  // (no de-duplication) and each has its own children.
  std::vector<KVCacheBlock*> find_cached_blocks(const BlockHash& hash, std::span<const int32_t> tokens,
                                                std::span<const KVCacheBlock* const> parents) const;
  // The first of find_cached_blocks(hash, tokens, {parent}), or null.
  KVCacheBlock* find_cached_block(const BlockHash& hash, std::span<const int32_t> tokens,
                                  const KVCacheBlock* parent) const;

  // Takes a reference on each block; a block with no references leaves the free queue.
  void touch(std::span<KVCacheBlock* const> blocks);

  // Drops a reference on each block; blocks that reach zero are appended to the free queue in the
  // given order (the first one given is evicted first). They keep their cached hash.
  void free_blocks(std::span<KVCacheBlock* const> ordered_blocks);

  // Publishes a full block whose KV has been computed: token ids, parent and hash are recorded.
  void cache_full_block(KVCacheBlock* block, const BlockHash& hash, std::span<const int32_t> tokens,
                        const KVCacheBlock* parent);

  // Drops every cached hash (all blocks must be free); false (and nothing done) otherwise.
  bool reset_prefix_cache();

  const KVCacheBlock& block(int32_t id) const { return blocks_.at(size_t(id)); }
  std::vector<int32_t> free_block_ids() const { return free_queue_.block_ids(); }

 private:
  // Removes the block's hash entry (the entry of this very block, not merely one with the same
  // hash) and clears its cached content.
  void evict_cached(KVCacheBlock* block);

  std::vector<KVCacheBlock> blocks_;  // never resized: blocks are referenced by address
  FreeBlockQueue free_queue_;
  std::unordered_map<BlockHash, std::vector<KVCacheBlock*>, BlockHashHasher> cached_;
  size_t num_cached_ = 0;
  bool enable_caching_;
};

}  // namespace pypto
