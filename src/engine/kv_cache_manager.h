#pragma once
// KVCacheManager: each request's block table (append-only) and the prefix cache on top of the
// BlockPool. The scheduler asks it for computed (cached) blocks of a new request, for slots for
// the tokens it schedules, to publish blocks once their KV is computed, and to free a request.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_hash.h"
#include "engine/block_pool.h"
#include "engine/request.h"
#include "engine/state_snapshots.h"

namespace pypto {

// Blocks found in the prefix cache for a request that holds none yet (not yet referenced).
struct ComputedBlocks {
  std::vector<KVCacheBlock*> blocks;
  int64_t num_computed_tokens = 0;  // blocks.size() * block_size
  // Models with a recurrent state: the snapshot entry holding the state after the hit (-1: none;
  // then the hit is empty).
  int32_t state_entry = -1;
};

struct PrefixCacheStats {
  int64_t requests = 0;        // lookups made when a request was admitted
  int64_t queried_tokens = 0;  // tokens of those requests
  int64_t hit_tokens = 0;      // tokens served from the cache
  // Models with a recurrent state (engine/state_snapshots.h): verified cached tokens a hit could
  // not use because no state snapshot ends there (the hit was cut back to the last one), and the
  // snapshots' own counts.
  int64_t tokens_without_state = 0;
  StateSnapshotStats state;
};

class KVCacheManager {
 public:
  KVCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
                 BlockHasher hasher = sha256_block_hash);

  int32_t block_size() const { return block_size_; }
  bool prefix_caching() const { return enable_prefix_caching_; }
  BlockPool& block_pool() { return pool_; }
  const BlockPool& block_pool() const { return pool_; }
  int64_t blocks_for_tokens(int64_t num_tokens) const { return (num_tokens + block_size_ - 1) / block_size_; }

  // Longest verified chain of cached full blocks for `req` (which holds no blocks). It never
  // covers the last token: on a full-prompt hit the last prompt token is still computed, so
  // the first sampled token comes from the same kernel path as a cold run. With state snapshots
  // the chain is cut back to its last block that ends where a snapshot exists (state_entry).
  ComputedBlocks get_computed_blocks(Request& req);

  // Models with a recurrent state (engine/state_snapshots.h): from now on a hit needs a state
  // snapshot at its end; `entries` of them (0: no hits at all), one every `interval` tokens
  // besides each chunk's last block boundary.
  void enable_state_snapshots(int32_t entries, int64_t interval);
  bool state_snapshots() const { return snapshots_ != nullptr; }
  // The saves of a step computing `req`'s positions [start, start + n) (entries reserved).
  std::vector<StateSave> plan_state_saves(const Request& req, int64_t start, int64_t n);
  // After the step: the saves (their blocks now published by cache_blocks) become findable.
  void commit_state_saves(const Request& req, std::span<const StateSave> saves);
  // A new request admitted with `hit` restores from its state entry this step (the entry stays
  // until end_state_step()). Logs the hit (debug), and the running counts at the 1st, 10th,
  // 100th, ... restore (info).
  void restore_state(const Request& req, const ComputedBlocks& hit);
  // The step is over: uncommitted saves are dropped, pins released.
  void end_state_step();

  // Reserves KV slots for `num_new_tokens` more tokens of `req`, after its computed tokens and
  // any prefix-cache hit `new_computed` (from get_computed_blocks, admitted now):
  //
  //   | < computed > | < new computed > |    < new >    |
  //   |                  < required >                   |
  //   | < held blocks > | < hit blocks > | < new blocks > |
  //
  // Returns the ids of the newly allocated blocks (hit blocks excluded), or nullopt without
  // changing anything when the pool cannot supply them.
  std::optional<std::vector<int32_t>> allocate_slots(Request& req, int64_t num_new_tokens,
                                                     const ComputedBlocks* new_computed = nullptr);

  // Publishes the request's full blocks covered by its num_computed_tokens (their KV is now
  // computed), so later requests can hit them.
  void cache_blocks(Request& req);

  // Releases the request's blocks, tail first (so its last blocks are evicted first). Cached
  // blocks stay reusable until evicted.
  void free(Request& req);

  void record_prefix_cache_query(int64_t num_tokens, int64_t num_hit_tokens);
  PrefixCacheStats prefix_cache_stats() const;

  // The request's block table (empty when it holds none).
  std::vector<int32_t> block_ids(const std::string& req_id) const;
  size_t num_requests() const { return req_blocks_.size(); }

  // Extends req.block_hashes to cover every full block of req.all_token_ids.
  void update_block_hashes(Request& req) const;

 private:
  struct RequestBlocks {
    std::vector<KVCacheBlock*> blocks;
    size_t num_cached_blocks = 0;  // leading blocks already in the prefix cache
  };

  int32_t block_size_;
  bool enable_prefix_caching_;
  BlockHasher hasher_;
  BlockPool pool_;
  std::unordered_map<std::string, RequestBlocks> req_blocks_;
  PrefixCacheStats stats_;
  bool recurrent_state_ = false;             // hits need a state snapshot
  // Cached tokens the last get_computed_blocks could not use for want of a snapshot; counted by
  // the record_prefix_cache_query of the admission it was for.
  int64_t last_tokens_without_state_ = 0;
  std::unique_ptr<StateSnapshots> snapshots_;  // null: none (no hits when recurrent_state_)
};

}  // namespace pypto
