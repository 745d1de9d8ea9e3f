#include "engine/draft_kv_blocks.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

DraftKvBlocks::DraftKvBlocks(int64_t num_blocks, int32_t block_size, bool prefix_caching, BlockHasher hasher)
    : block_size_(block_size),
      prefix_caching_(prefix_caching),
      enabled_(prefix_caching),
      hasher_(std::move(hasher)),
      pool_(int32_t(num_blocks), prefix_caching) {
  PYPTO_ASSERT(num_blocks > 0 && num_blocks < (int64_t(1) << 31), "draft KV blocks: ", num_blocks);
  PYPTO_ASSERT(block_size > 0, "draft KV block size ", block_size);
}

void DraftKvBlocks::hash_blocks(Seq& s, std::span<const int32_t> tokens, size_t n,
                                std::span<const BlockHash> known) const {
  const size_t bs = size_t(block_size_);
  PYPTO_ASSERT(n * bs <= tokens.size(), "hashing ", n, " blocks of ", tokens.size(), " tokens");
  for (size_t i = s.hashes.size(); i < n; ++i) {
    if (i < known.size()) {
      s.hashes.push_back(known[i]);
      continue;
    }
    const BlockHash* parent = i == 0 ? nullptr : &s.hashes[i - 1];
    s.hashes.push_back(hasher_(parent, tokens.subspan(i * bs, bs)));
  }
}

int64_t DraftKvBlocks::restore(Seq& s, std::span<const int32_t> tokens, int64_t max_tokens,
                               std::span<const BlockHash> known) {
  PYPTO_ASSERT(s.blocks.empty(), "restoring into a sequence that holds ", s.blocks.size(), " blocks");
  s.hashes.clear();
  s.num_cached = 0;
  if (!enabled_) return 0;
  const int64_t asked = std::clamp<int64_t>(max_tokens, 0, int64_t(tokens.size()));
  queried_tokens_ += asked;
  if (pool_.num_cached_blocks() == 0) return 0;
  const size_t bs = size_t(block_size_);
  const size_t max_blocks = size_t(asked) / bs;
  // As KVCacheManager::get_computed_blocks: every verified copy of a level may be the parent of
  // the next (identical blocks published separately each have their own children).
  std::vector<const KVCacheBlock*> parents = {nullptr};
  for (size_t i = 0; i < max_blocks; ++i) {
    hash_blocks(s, tokens, i + 1, known);
    const std::vector<KVCacheBlock*> found = pool_.find_cached_blocks(s.hashes[i], tokens.subspan(i * bs, bs), parents);
    if (found.empty()) break;
    KVCacheBlock* pick = found.front();  // prefer a copy already held: no free block taken
    for (KVCacheBlock* b : found)
      if (b->ref_cnt > 0) {
        pick = b;
        break;
      }
    s.blocks.push_back(pick);
    parents.assign(found.begin(), found.end());
  }
  s.hashes.resize(s.blocks.size());
  pool_.touch(s.blocks);
  for (const KVCacheBlock* b : s.blocks) s.ids.push_back(b->block_id);
  s.num_cached = s.blocks.size();
  hit_tokens_ += cached_tokens(s);
  return cached_tokens(s);
}

bool DraftKvBlocks::reserve(Seq& s, int64_t tokens) {
  const size_t need = size_t((tokens + block_size_ - 1) / block_size_);
  if (need <= s.blocks.size()) return true;
  if (int64_t(need - s.blocks.size()) > free_blocks()) return false;
  for (KVCacheBlock* b : pool_.get_new_blocks(int32_t(need - s.blocks.size()))) {
    s.blocks.push_back(b);
    s.ids.push_back(b->block_id);
  }
  return true;
}

void DraftKvBlocks::publish(Seq& s, std::span<const int32_t> fed, std::span<const int32_t> verified, int64_t limit,
                            std::span<const BlockHash> known) {
  if (!enabled_) return;
  // KV at position p holds verified content only where every token up to p is the verified one.
  const size_t end = std::min({fed.size(), verified.size(), size_t(std::max<int64_t>(limit, 0))});
  size_t match = 0;
  while (match < end && fed[match] == verified[match]) ++match;
  const size_t full = std::min(match / size_t(block_size_), s.blocks.size());
  if (full <= s.num_cached) return;
  hash_blocks(s, verified, full, known);
  const size_t bs = size_t(block_size_);
  for (size_t i = s.num_cached; i < full; ++i)
    pool_.cache_full_block(s.blocks[i], s.hashes[i], verified.subspan(i * bs, bs), i == 0 ? nullptr : s.blocks[i - 1]);
  s.num_cached = full;
}

void DraftKvBlocks::release(Seq& s) {
  std::vector<KVCacheBlock*> reversed(s.blocks.rbegin(), s.blocks.rend());
  pool_.free_blocks(reversed);
  s = Seq{};
}

}  // namespace pypto
