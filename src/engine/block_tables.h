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

  // Hybrid models (Gated DeltaNet state per sequence, model/gdn_state.h): from now on every
  // request also holds one of `slots` state slots, taken when it is scheduled new (or resumed)
  // and given back when it finishes or is preempted; build_forward_batch passes them in
  // ForwardBatch::state_slots. Running more requests than slots is an Error naming the limit.
  void enable_state_slots(int32_t slots);
  int32_t state_slot(const std::string& req_id) const;  // -1 without state slots

 private:
  std::unordered_map<std::string, std::vector<int32_t>> tables_;
  std::unordered_map<std::string, int32_t> slots_;  // req id → state slot
  std::vector<int32_t> free_slots_;                 // a stack; empty when state slots are off
  int32_t num_slots_ = 0;
  void release_slot(const std::string& req_id);
};

// Applies `so` to `tables` and fills `batch` with its sequences (model_executor.h's contract):
// tokens, positions, slots, block tables, logits rows. Every block id is shifted by block_offset
// (a virtual engine's share of a larger cache, parallel/replicas/step_pipeline.h).
void build_forward_batch(const SchedulerOutput& so, BlockTables& tables, int32_t block_size, ForwardBatch& batch,
                         int32_t block_offset = 0);

}  // namespace pypto
