#pragma once
// Speculative decoding on a hybrid model: the Gated DeltaNet states a verify step leaves behind at
// each of its draft positions, so that after verification the sequence keeps exactly the state at
// its last accepted token (never one advanced past it).
//
// A sequence verifying k drafts computes n = 1 + k rows in one step: its last verified token and
// the k drafts. The state after all n rows is the slot's own state (model/gdn_state.h); the states
// after rows 1 .. k (the verified token alone, then each accepted-draft prefix) are copied, in the
// middle of the step, into this store's k entries of the sequence's slot. If the engine accepts
// a < k drafts, the sequence's next step starts at the position after the verified token and the
// a accepted drafts, while its slot's state covers all n rows: roll_back() then copies entry a
// back into the slot. Each entry is exact (the recurrence runs token by token, so a state saved
// after row j equals the state of a step that ended at row j).
//
// Entries live from the end of one step of a sequence to the start of its next one: begin_step()
// either rolls the slot back from them or finds the slot already where the sequence continues,
// and forgets them in both cases. Layout per (slot, entry, GDN layer): conv [K - 1, conv_dim],
// recurrent [n_v, d_k, d_v], both f32, as in GdnStatePool. Memory: slots x depth sequence states.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/memory.h"
#include "io/model_config.h"
#include "model/gdn_state.h"

namespace pypto {

class GdnRollbackStates {
 public:
  GdnRollbackStates() = default;
  // `depth` entries (the largest k a verify step may carry) for each of `slots` slots over
  // `gdn_layers` GDN layers of (this rank's) config c. depth 0: no speculation, no memory.
  GdnRollbackStates(const ModelConfig& c, int32_t slots, int32_t gdn_layers, int32_t depth);

  int32_t depth() const { return depth_; }
  size_t bytes() const { return storage_.size(); }
  float* conv(int32_t slot, int32_t entry, int32_t layer) { return base(slot, entry, layer); }
  float* recurrent(int32_t slot, int32_t entry, int32_t layer) { return base(slot, entry, layer) + conv_floats_; }
  // Tokens entry `entry` of `slot` covers (-1: none).
  int64_t tokens(int32_t slot, int32_t entry) const { return tokens_[index(slot, entry)]; }
  void set_tokens(int32_t slot, int32_t entry, int64_t n) { tokens_[index(slot, entry)] = n; }
  void forget(int32_t slot);

  // If an entry of `slot` covers exactly `position` tokens, the slot's state in `pool` becomes a
  // copy of it (every layer) and true is returned; else false and nothing changes.
  bool roll_back(GdnStatePool& pool, int32_t slot, int64_t position);
  // Roll-backs done so far (tests check that rejections really took this path).
  int64_t num_rollbacks() const { return rollbacks_; }

 private:
  float* base(int32_t slot, int32_t entry, int32_t layer);
  size_t index(int32_t slot, int32_t entry) const;
  int32_t slots_ = 0, depth_ = 0, layers_ = 0;
  size_t conv_floats_ = 0, recurrent_floats_ = 0, layer_floats_ = 0;
  AlignedBuffer storage_;
  std::vector<int64_t> tokens_;  // [slots, depth]
  int64_t rollbacks_ = 0;
};

}  // namespace pypto
