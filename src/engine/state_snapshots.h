#pragma once
// Prefix caching for models with a per-sequence recurrent state (the hybrids' Gated DeltaNet
// layers): the engine-side index of the model's state snapshot entries (model/gdn_state.h).
//
// The state after a prefix is a function of the whole prefix, so cached KV blocks alone cannot
// resume a sequence: a hit may only resume where a copy of the state at the end of the hit was
// saved. Each entry is tied to the KV block that ends its prefix (block id and generation, so it
// is verified exactly as that block is: its hash chain, tokens and parents, BlockPool), and dies
// with it: once the block is evicted and reused (its generation moves on) or un-cached, the entry
// is stale and is the first to be reused. Entries also have their own LRU budget (the number the
// model holds, sized at start-up).
//
// Which boundaries are saved (plan()): for a request computing positions [start, start + n) in
// a step, the last block boundary in (start, start + n] (the end of each prompt or prompt chunk,
// and during decode every block_size tokens) and every multiple of `interval` tokens in it. The
// saves made while decoding replace each other (only a request's latest one stays attractive to
// keep; the earlier ones are evicted first), so a finished turn leaves its prompt's snapshot(s) and
// the one at the last boundary it computed: the next turn of the chat, whose prompt repeats
// this one's, resumes there.
//
// Life of an entry: Free → Pending (reserved by plan(); the model writes it during the step) →
// Valid (commit() after the step, findable) → Free (end_step() for a save never committed, or
// reused by a later plan()). An entry a request restores from this step is pinned until the
// step ends, so no save of the same step reuses it.
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_pool.h"
#include "engine/scheduler_output.h"

namespace pypto {

struct StateSnapshotStats {
  int64_t saved = 0;     // snapshots committed
  int64_t restored = 0;  // prefix-cache hits that resumed from a snapshot
  int64_t evicted = 0;   // valid snapshots reused for a newer one (LRU)
  int64_t skipped = 0;   // saves planned with every entry pinned or pending: not taken
};

class StateSnapshots {
 public:
  // entries >= 1; interval: 0 (chunk ends only) or a multiple of block_size.
  StateSnapshots(const BlockPool& pool, int32_t entries, int32_t block_size, int64_t interval);

  int32_t entries() const { return int32_t(entries_.size()); }
  int64_t interval() const { return interval_; }

  // The entry holding the state at the end of `block` (the prefix it ends), or -1: none, or
  // the block has been evicted or reused since.
  int32_t find(const KVCacheBlock& block) const;

  // The step's saves for request `req_id` computing positions [start, start + n) (see the file
  // comment); each gets an entry now (Pending).
  std::vector<StateSave> plan(int64_t start, int64_t n);

  // After the step computed them: each save's entry becomes findable, tied to the block of
  // `blocks` (the request's block table, published) that ends at its position. A save past the
  // prompt (num_prompt_tokens) that is not on the interval replaces the request's previous one.
  void commit(const std::string& req_id, std::span<const StateSave> saves, std::span<KVCacheBlock* const> blocks,
              int64_t num_prompt_tokens);

  // A request restores from `entry` this step: it is used now and not reused before end_step().
  void pin(int32_t entry);

  // The step is over (updated, or failed without an update): saves never committed are freed
  // and pins dropped.
  void end_step();

  // The request is gone (finished or preempted): its snapshots stay; only its bookkeeping goes.
  void forget(const std::string& req_id) { latest_.erase(req_id); }

  const StateSnapshotStats& stats() const { return stats_; }
  // Entries now findable (valid and not stale).
  int32_t num_valid() const;

 private:
  enum class State : uint8_t { Free, Pending, Valid };
  struct Entry {
    State state = State::Free;
    int32_t block_id = -1;    // Valid: the block ending the prefix
    uint64_t generation = 0;  // the block's generation when the entry was committed
    uint64_t last_used = 0;   // LRU clock; 0: superseded, evicted first
    bool pinned = false;
  };
  bool stale(const Entry& e) const;
  // A Free or stale entry, else the least recently used unpinned Valid one; -1 if none.
  int32_t take();
  void release(int32_t e);

  const BlockPool& pool_;
  int32_t block_size_;
  int64_t interval_;
  std::vector<Entry> entries_;
  std::unordered_map<int32_t, int32_t> by_block_;   // block id → its Valid entry
  struct Latest {
    int32_t entry, block_id;
    uint64_t generation;
  };
  std::unordered_map<std::string, Latest> latest_;  // request → its latest replaceable snapshot
  uint64_t clock_ = 0;
  StateSnapshotStats stats_;
};

}  // namespace pypto
