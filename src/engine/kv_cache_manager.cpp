#include "engine/kv_cache_manager.h"

#include <algorithm>

#include "core/error.h"
#include "core/log.h"

namespace pypto {

KVCacheManager::KVCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
                               BlockHasher hasher)
    : block_size_(block_size),
      enable_prefix_caching_(enable_prefix_caching),
      hasher_(std::move(hasher)),
      pool_(num_blocks, enable_prefix_caching) {
  if (block_size < 1) fail("--block-size must be >= 1, got ", block_size);
}

void KVCacheManager::update_block_hashes(Request& req) const {
  const size_t full = size_t(req.num_tokens() / block_size_);
  const std::span<const int32_t> tokens(req.all_token_ids);
  for (size_t i = req.block_hashes.size(); i < full; ++i) {
    const BlockHash* parent = i == 0 ? nullptr : &req.block_hashes[i - 1];
    req.block_hashes.push_back(hasher_(parent, tokens.subspan(i * size_t(block_size_), size_t(block_size_))));
  }
}

ComputedBlocks KVCacheManager::get_computed_blocks(Request& req) {
  ComputedBlocks out;
  if (!enable_prefix_caching_ || req.num_tokens() == 0) return out;
  if (recurrent_state_ && !snapshots_) return out;  // a hit could never resume the state
  PYPTO_ASSERT(!req_blocks_.contains(req.request_id), "request ", req.request_id, " already holds blocks");
  update_block_hashes(req);
  const size_t max_hit_blocks = size_t((req.num_tokens() - 1) / block_size_);
  const std::span<const int32_t> tokens(req.all_token_ids);
  // All verified copies of each level are kept as possible parents of the next: identical blocks
  // computed in one step are each published, and their children hang off different copies.
  std::vector<const KVCacheBlock*> parents = {nullptr};
  size_t resumable = 0;  // with state snapshots: blocks up to the last one a snapshot ends
  for (size_t i = 0; i < max_hit_blocks; ++i) {
    const std::vector<KVCacheBlock*> found = pool_.find_cached_blocks(
        req.block_hashes[i], tokens.subspan(i * size_t(block_size_), size_t(block_size_)), parents);
    if (found.empty()) break;
    // Any copy holds the same KV; prefer one already held so no free block is taken, and with
    // state snapshots one that ends at a snapshot (the hit may stop here).
    KVCacheBlock* pick = found.front();
    for (KVCacheBlock* b : found)
      if (b->ref_cnt > 0) {
        pick = b;
        break;
      }
    if (snapshots_) {
      KVCacheBlock* with_state = nullptr;
      int32_t entry = -1;
      for (KVCacheBlock* b : found)
        if (const int32_t e = snapshots_->find(*b);
            e >= 0 && (!with_state || (b->ref_cnt > 0 && with_state->ref_cnt == 0))) {
          with_state = b;
          entry = e;
        }
      if (with_state) {
        pick = with_state;
        out.state_entry = entry;
        resumable = i + 1;
      }
    }
    out.blocks.push_back(pick);
    parents.assign(found.begin(), found.end());
  }
  if (snapshots_) {
    last_tokens_without_state_ = int64_t(out.blocks.size() - resumable) * block_size_;
    out.blocks.resize(resumable);
    if (resumable == 0) out.state_entry = -1;
  }
  out.num_computed_tokens = int64_t(out.blocks.size()) * block_size_;
  return out;
}

std::optional<std::vector<int32_t>> KVCacheManager::allocate_slots(Request& req, int64_t num_new_tokens,
                                                                   const ComputedBlocks* new_computed) {
  PYPTO_ASSERT(num_new_tokens > 0, "allocate_slots with ", num_new_tokens, " tokens");
  auto it = req_blocks_.find(req.request_id);
  const size_t held = it == req_blocks_.end() ? 0 : it->second.blocks.size();
  const size_t num_hits = new_computed ? new_computed->blocks.size() : 0;
  PYPTO_ASSERT(num_hits == 0 || held == 0, "prefix hits for a request that holds blocks");

  const int64_t required = req.num_computed_tokens + (new_computed ? new_computed->num_computed_tokens : 0) +
                           num_new_tokens;
  const int64_t need_total = blocks_for_tokens(required);
  const int64_t num_new_blocks = std::max<int64_t>(0, need_total - int64_t(held) - int64_t(num_hits));
  // Hit blocks with no references sit in the free queue: touching them takes them out of it.
  int64_t hits_in_free_queue = 0;
  for (size_t i = 0; i < num_hits; ++i) hits_in_free_queue += new_computed->blocks[i]->ref_cnt == 0;
  if (num_new_blocks > int64_t(pool_.num_free_blocks()) - hits_in_free_queue) return std::nullopt;

  RequestBlocks& rb = req_blocks_[req.request_id];
  if (num_hits > 0) {
    pool_.touch(new_computed->blocks);
    rb.blocks.insert(rb.blocks.end(), new_computed->blocks.begin(), new_computed->blocks.end());
    rb.num_cached_blocks = num_hits;
  }
  std::vector<int32_t> ids;
  for (KVCacheBlock* b : pool_.get_new_blocks(int32_t(num_new_blocks))) {
    rb.blocks.push_back(b);
    ids.push_back(b->block_id);
  }
  return ids;
}

void KVCacheManager::cache_blocks(Request& req) {
  if (!enable_prefix_caching_) return;
  auto it = req_blocks_.find(req.request_id);
  if (it == req_blocks_.end()) return;
  RequestBlocks& rb = it->second;
  const size_t full = std::min(size_t(req.num_computed_tokens / block_size_), rb.blocks.size());
  if (full <= rb.num_cached_blocks) return;
  update_block_hashes(req);
  const std::span<const int32_t> tokens(req.all_token_ids);
  for (size_t i = rb.num_cached_blocks; i < full; ++i) {
    const KVCacheBlock* parent = i == 0 ? nullptr : rb.blocks[i - 1];
    pool_.cache_full_block(rb.blocks[i], req.block_hashes[i],
                           tokens.subspan(i * size_t(block_size_), size_t(block_size_)), parent);
  }
  rb.num_cached_blocks = full;
}

void KVCacheManager::free(Request& req) {
  if (snapshots_) snapshots_->forget(req.request_id);
  auto it = req_blocks_.find(req.request_id);
  if (it == req_blocks_.end()) return;
  std::vector<KVCacheBlock*> reversed(it->second.blocks.rbegin(), it->second.blocks.rend());
  pool_.free_blocks(reversed);
  req_blocks_.erase(it);
}

void KVCacheManager::record_prefix_cache_query(int64_t num_tokens, int64_t num_hit_tokens) {
  ++stats_.requests;
  stats_.queried_tokens += num_tokens;
  stats_.hit_tokens += num_hit_tokens;
  stats_.tokens_without_state += last_tokens_without_state_;
  last_tokens_without_state_ = 0;
}

void KVCacheManager::enable_state_snapshots(int32_t entries, int64_t interval) {
  PYPTO_ASSERT(req_blocks_.empty(), "state snapshots enabled with requests holding blocks");
  recurrent_state_ = true;
  snapshots_.reset();
  if (enable_prefix_caching_ && entries > 0)
    snapshots_ = std::make_unique<StateSnapshots>(pool_, entries, block_size_, interval);
}

std::vector<StateSave> KVCacheManager::plan_state_saves(const Request& req, int64_t start, int64_t n) {
  if (!snapshots_ || req.pooling) return {};
  return snapshots_->plan(start, n);
}

void KVCacheManager::commit_state_saves(const Request& req, std::span<const StateSave> saves) {
  if (saves.empty()) return;
  PYPTO_ASSERT(snapshots_ != nullptr, "state saves without state snapshots");
  auto it = req_blocks_.find(req.request_id);
  PYPTO_ASSERT(it != req_blocks_.end(), "state saves for request ", req.request_id, ", which holds no blocks");
  snapshots_->commit(req.request_id, saves, it->second.blocks, req.num_prompt_tokens());
}

void KVCacheManager::restore_state(const Request& req, const ComputedBlocks& hit) {
  PYPTO_ASSERT(snapshots_ != nullptr && hit.state_entry >= 0, "request ", req.request_id,
               ": restoring a state snapshot without one");
  snapshots_->pin(hit.state_entry);
  log_debug("request ", req.request_id, ": prefix-cache hit of ", hit.num_computed_tokens, " of ", req.num_tokens(),
            " tokens resumes from state snapshot ", hit.state_entry);
  const StateSnapshotStats& st = snapshots_->stats();
  int64_t p = 1;
  while (p * 10 <= st.restored) p *= 10;
  if (st.restored == p)
    log_info("prefix cache (recurrent state): ", st.restored, " hits resumed from state snapshots so far; ",
             stats_.hit_tokens, " of ", stats_.queried_tokens, " queried tokens served from ",
             "the cache; ", st.saved, " snapshots taken, ", st.evicted, " evicted, ", snapshots_->num_valid(), " of ",
             snapshots_->entries(), " held");
}

void KVCacheManager::end_state_step() {
  if (snapshots_) snapshots_->end_step();
}

PrefixCacheStats KVCacheManager::prefix_cache_stats() const {
  PrefixCacheStats s = stats_;
  if (snapshots_) s.state = snapshots_->stats();
  return s;
}

std::vector<int32_t> KVCacheManager::block_ids(const std::string& req_id) const {
  std::vector<int32_t> out;
  auto it = req_blocks_.find(req_id);
  if (it != req_blocks_.end())
    for (const KVCacheBlock* b : it->second.blocks) out.push_back(b->block_id);
  return out;
}

}  // namespace pypto
