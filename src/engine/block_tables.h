#pragma once
// The executor side's copy of every request's block table, kept up to date from each
// SchedulerOutput (which sends full tables only for new or resumed requests, and only the
// appended block ids otherwise). Any ModelExecutor can use it to follow the contract in
// model_executor.h.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/scheduler_output.h"
#include "model/forward_batch.h"

namespace pypto {

class BlockTables {
 public:
  // Drops finished and preempted requests, then applies every scheduled request's block ids.
  void apply(const SchedulerOutput& so);
  // The table of a request scheduled in the last applied output (Error if unknown).
  const std::vector<int32_t>& table(const std::string& req_id) const;
  size_t size() const { return tables_.size(); }

 private:
  std::unordered_map<std::string, std::vector<int32_t>> tables_;
};

// Applies `so` to `tables` and fills `batch` with its sequences (model_executor.h's contract):
// tokens, positions, slots, block tables, logits rows. Every block id is shifted by block_offset
// (a virtual engine's share of a larger cache, parallel/replicas/step_pipeline.h).
void build_forward_batch(const SchedulerOutput& so, BlockTables& tables, int32_t block_size, ForwardBatch& batch,
                         int32_t block_offset = 0);

}  // namespace pypto
