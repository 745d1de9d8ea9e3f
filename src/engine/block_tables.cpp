#include "engine/block_tables.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

void BlockTables::enable_state_slots(int32_t slots) {
  PYPTO_ASSERT(slots >= 1 && tables_.empty(), "state slots ", slots);
  num_slots_ = slots;
  free_slots_.clear();
  for (int32_t s = slots - 1; s >= 0; --s) free_slots_.push_back(s);  // slot 0 on top
}

int32_t BlockTables::state_slot(const std::string& req_id) const {
  if (num_slots_ == 0) return -1;
  auto it = slots_.find(req_id);
  if (it == slots_.end()) fail("no state slot for request ", req_id);
  return it->second;
}

void BlockTables::release_slot(const std::string& req_id) {
  auto it = slots_.find(req_id);
  if (it == slots_.end()) return;
  free_slots_.push_back(it->second);
  slots_.erase(it);
}

void BlockTables::apply(const SchedulerOutput& so) {
  for (const std::string& id : so.finished_req_ids) {
    tables_.erase(id);
    release_slot(id);
  }
  for (const std::string& id : so.preempted_req_ids) {
    tables_.erase(id);
    release_slot(id);
  }
  for (const ScheduledRequest& s : so.scheduled) {
    if (s.is_new) {
      tables_[s.req_id] = s.block_ids;
      if (num_slots_ > 0 && !slots_.count(s.req_id)) {
        if (free_slots_.empty())
          fail("request ", s.req_id, ": all ", num_slots_, " Gated DeltaNet state slots are taken (--max-num-seqs)");
        slots_[s.req_id] = free_slots_.back();
        free_slots_.pop_back();
      }
      continue;
    }
    auto it = tables_.find(s.req_id);
    PYPTO_ASSERT(it != tables_.end(), "running request ", s.req_id, " has no block table");
    it->second.insert(it->second.end(), s.block_ids.begin(), s.block_ids.end());
  }
}

const std::vector<int32_t>& BlockTables::table(const std::string& req_id) const {
  auto it = tables_.find(req_id);
  if (it == tables_.end()) fail("no block table for request ", req_id);
  return it->second;
}

void build_forward_batch(const SchedulerOutput& so, BlockTables& tables, int32_t block_size, ForwardBatch& batch,
                         int32_t block_offset) {
  tables.apply(so);
  int32_t max_blocks = 0;
  for (const ScheduledRequest& s : so.scheduled)
    max_blocks = std::max(max_blocks, static_cast<int32_t>(tables.table(s.req_id).size()));
  batch.clear();
  batch.max_blocks_per_seq = max_blocks;
  std::vector<int32_t> shifted;
  for (const ScheduledRequest& s : so.scheduled) {
    const std::vector<int32_t>* t = &tables.table(s.req_id);
    if (block_offset != 0) {
      shifted.assign(t->begin(), t->end());
      for (int32_t& b : shifted) b += block_offset;
      t = &shifted;
    }
    const std::vector<int32_t>& table = *t;
    PYPTO_ASSERT(static_cast<int64_t>(s.token_ids.size()) == s.num_scheduled_tokens);
    PYPTO_ASSERT(s.num_draft_tokens == 0 || (s.samples && s.num_scheduled_tokens == 1 + s.num_draft_tokens),
                 "request ", s.req_id, ": ", s.num_draft_tokens, " drafts in ", s.num_scheduled_tokens, " tokens");
    PYPTO_ASSERT(static_cast<int64_t>(table.size()) * block_size >= s.num_computed_tokens + s.num_scheduled_tokens,
                 "request ", s.req_id, " has too few blocks");
    batch.add_sequence(s.token_ids.data(), static_cast<int32_t>(s.num_scheduled_tokens),
                       static_cast<int32_t>(s.num_computed_tokens), table.data(), static_cast<int32_t>(table.size()),
                       block_size,
                       !s.samples                ? ForwardBatch::Logits::None
                       : s.num_draft_tokens > 0 ? ForwardBatch::Logits::All  // verify: 1 + k rows
                                                : ForwardBatch::Logits::Last);
    if (const int32_t slot = tables.state_slot(s.req_id); slot >= 0) {
      batch.state_slots.push_back(slot);
      batch.state_restore.push_back(s.state_restore);
      batch.draft_rows.push_back(static_cast<int32_t>(s.num_draft_tokens));  // rollback points (model/gdn_rollback.h)
      const int32_t seq = batch.num_seqs() - 1;
      for (const StateSave& v : s.state_saves)
        batch.state_saves.push_back({seq, static_cast<int32_t>(v.position - s.num_computed_tokens), v.entry});
    } else {
      PYPTO_ASSERT(s.state_restore < 0 && s.state_saves.empty(), "request ", s.req_id,
                   ": state snapshots for a model without a recurrent state");
    }
  }
}

}  // namespace pypto
