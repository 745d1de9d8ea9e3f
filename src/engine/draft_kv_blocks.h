#pragma once
// The draft model's KV blocks (engine/draft_model_proposer.h) and their prefix cache.
//
// The draft keeps its own paged KV pool, with its own block ids, beside the target's. Without a
// cache of its own, a request whose prompt hits the target's prefix cache (a chat's next turn, a
// shared system prompt) still had the draft prefill the whole cached prefix in the hit's step:
// seconds of CPU time on a long history. So the draft's blocks live in a BlockPool of their own
// (engine/block_pool.h, the target's class: reference counts, LRU free queue, hash -> blocks with
// the token and parent checks that make a hit safe whatever the hash), keyed by the same chained
// block hashes as the target's (engine/block_hash.h; the request's own block_hashes where the
// target computed them). A sequence holding no blocks restores the longest cached chain of its
// tokens and computes only the rest.
//
// Only verified KV is published: publish() takes the tokens the draft fed (which include its
// drafts, rejected ones too) and the request's verified tokens, and caches only full blocks inside
// their common prefix. A published or restored block is never written again (a sequence's writes
// start at its held tokens, which never fall below its cached blocks), so another request may read
// it while this one drafts on. Eviction is the pool's: a new block comes from the head of the free
// queue (least recently used), dropping the hash it carried; blocks held by a request are never in
// that queue.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/block_hash.h"
#include "engine/block_pool.h"

namespace pypto {

class DraftKvBlocks {
 public:
  DraftKvBlocks(int64_t num_blocks, int32_t block_size, bool prefix_caching, BlockHasher hasher = sha256_block_hash);

  // One request's blocks, in position order.
  struct Seq {
    std::vector<KVCacheBlock*> blocks;
    std::vector<int32_t> ids;       // the blocks' ids, for ForwardBatch
    std::vector<BlockHash> hashes;  // chain hashes of blocks [0, hashes.size()) (at least the cached ones)
    size_t num_cached = 0;          // leading blocks in the prefix cache (restored or published): read-only
  };
  // The tokens of s's cached blocks: s's writes must start at or after this position.
  int64_t cached_tokens(const Seq& s) const { return int64_t(s.num_cached) * block_size_; }

  // For a sequence holding no blocks: takes the longest verified chain of cached full blocks of
  // tokens[0, max_tokens) (`known`: the request's own block hashes, any prefix of the chain) and
  // returns the number of tokens it covers (0 when caching is off).
  int64_t restore(Seq& s, std::span<const int32_t> tokens, int64_t max_tokens, std::span<const BlockHash> known);
  // Grows s to cover `tokens` positions; false (nothing taken) when the pool is short.
  bool reserve(Seq& s, int64_t tokens);
  // Publishes s's full blocks inside [0, limit) whose KV holds `verified`: the prefix where `fed`
  // (the tokens whose KV s holds, position order) equals `verified`.
  void publish(Seq& s, std::span<const int32_t> fed, std::span<const int32_t> verified, int64_t limit,
               std::span<const BlockHash> known);
  // Gives s's blocks back, its last ones evicted first (the shared head of a sequence is the most
  // likely to be hit again).
  void release(Seq& s);

  // Off: nothing is published or restored from now on (what is cached stays until evicted).
  // For comparisons (bench_draft_prefix); the constructor's prefix_caching is the setting.
  void set_enabled(bool on) { enabled_ = on && prefix_caching_; }

  int64_t num_blocks() const { return pool_.num_blocks(); }
  // Blocks not held by any request (cached ones among them, revivable until evicted).
  int64_t free_blocks() const { return pool_.num_free_blocks(); }
  size_t num_cached_blocks() const { return pool_.num_cached_blocks(); }
  // Tokens looked up by restore() (its max_tokens, while caching is on) and restored from the
  // cache, in all: the draft's counterpart of the target's prefix-cache queries and hits.
  int64_t queried_tokens() const { return queried_tokens_; }
  int64_t hit_tokens() const { return hit_tokens_; }

 private:
  // Extends s.hashes to `n` blocks of `tokens`, from `known` where it reaches.
  void hash_blocks(Seq& s, std::span<const int32_t> tokens, size_t n, std::span<const BlockHash> known) const;

  int32_t block_size_;
  bool prefix_caching_;
  bool enabled_;
  BlockHasher hasher_;
  BlockPool pool_;
  int64_t queried_tokens_ = 0, hit_tokens_ = 0;
};

}  // namespace pypto
