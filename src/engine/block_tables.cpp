#include "engine/block_tables.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

void BlockTables::apply(const SchedulerOutput& so) {
  for (const std::string& id : so.finished_req_ids) tables_.erase(id);
  for (const std::string& id : so.preempted_req_ids) tables_.erase(id);
  for (const ScheduledRequest& s : so.scheduled) {
    if (s.is_new) {
      tables_[s.req_id] = s.block_ids;
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
    PYPTO_ASSERT(static_cast<int64_t>(table.size()) * block_size >= s.num_computed_tokens + s.num_scheduled_tokens,
                 "request ", s.req_id, " has too few blocks");
    batch.add_sequence(s.token_ids.data(), static_cast<int32_t>(s.num_scheduled_tokens),
                       static_cast<int32_t>(s.num_computed_tokens), table.data(), static_cast<int32_t>(table.size()),
                       block_size, s.samples ? ForwardBatch::Logits::Last : ForwardBatch::Logits::None);
  }
}

}  // namespace pypto
