#pragma once
// The per-sequence state of a hybrid model's Gated DeltaNet layers, in a pool sized at start-up:
// for every slot and GDN layer a conv state [K - 1, conv_dim] (the last K - 1 raw in_proj_qkv
// rows, oldest first) and a recurrent state [n_v, d_k, d_v], both f32. A slot is a sequence's
// for its whole life (engine/block_tables.h assigns them like block tables); its size does not
// depend on the sequence's length. The pool also remembers how many tokens each slot's state has
// consumed, so a sequence that does not continue exactly where its state ends (a prefix-cache hit
// without a snapshot, or a resumed request the state does not cover) is refused instead of
// silently computed wrong.
//
// Beside the slots the pool holds `snapshots` entries of the same layout: copies of a sequence's
// state at a block boundary, saved in the middle of a step (GatedDeltaNet::forward) and copied
// back into a fresh slot when a later sequence resumes from that prefix (prefix caching; which
// entry holds which prefix is the engine's bookkeeping, engine/state_snapshots.h).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/memory.h"
#include "io/model_config.h"

namespace pypto {

// The config of one tensor-parallel rank's Gated DeltaNet share: its 1/tp of the key heads and of
// the value heads they serve (value head h reads key head h / (n_v / n_k), so a rank's key heads
// come with a contiguous run of value heads). Divisibility is checked when staging.
ModelConfig gdn_rank_config(const ModelConfig& c, int tp_size);

class GdnStatePool {
 public:
  GdnStatePool() = default;
  // slots >= 1, snapshots >= 0; the shape from the config (its GDN layers among layers
  // [layer_begin, layer_end)).
  GdnStatePool(const ModelConfig& c, int32_t slots, int32_t gdn_layers, int32_t snapshots = 0);

  // Bytes one sequence's state (or one snapshot) costs over `gdn_layers` layers of config c.
  static size_t bytes_per_slot(const ModelConfig& c, int32_t gdn_layers);

  int32_t slots() const { return slots_; }
  int32_t snapshots() const { return snapshots_; }
  size_t bytes() const { return storage_.size(); }
  float* conv(int32_t slot, int32_t layer) { return base(slot, layer); }                  // [K - 1, conv_dim]
  float* recurrent(int32_t slot, int32_t layer) { return base(slot, layer) + conv_floats_; }  // [n_v, d_k, d_v]
  // Zeroes the slot's state (a sequence starting at position 0).
  void reset(int32_t slot);
  int64_t tokens(int32_t slot) const { return tokens_[size_t(slot)]; }
  void set_tokens(int32_t slot, int64_t n) { tokens_[size_t(slot)] = n; }

  // Snapshot entry e, same layout as a slot.
  float* snapshot_conv(int32_t e, int32_t layer) { return base(snapshot_index(e), layer); }
  float* snapshot_recurrent(int32_t e, int32_t layer) { return base(snapshot_index(e), layer) + conv_floats_; }
  int64_t snapshot_tokens(int32_t e) const { return tokens_[size_t(snapshot_index(e))]; }
  void set_snapshot_tokens(int32_t e, int64_t n) { tokens_[size_t(snapshot_index(e))] = n; }
  // The slot's state becomes a copy of entry e (every layer), covering snapshot_tokens(e) tokens.
  void restore(int32_t slot, int32_t e);

 private:
  float* base(int32_t index, int32_t layer);  // index: a slot, or slots_ + a snapshot entry
  int32_t snapshot_index(int32_t e) const;
  int32_t slots_ = 0, snapshots_ = 0, layers_ = 0;
  size_t conv_floats_ = 0, layer_floats_ = 0;  // per (slot, layer): conv, then recurrent
  AlignedBuffer storage_;
  std::vector<int64_t> tokens_;  // [slots + snapshots]
};

}  // namespace pypto
