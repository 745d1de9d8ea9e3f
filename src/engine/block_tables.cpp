#include "engine/block_tables.h"

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

}  // namespace pypto
