#pragma once
// The per-sequence state of a hybrid model's Gated DeltaNet layers, in a pool sized at start-up:
// for every slot and GDN layer a conv state [K - 1, conv_dim] (the last K - 1 raw in_proj_qkv
// rows, oldest first) and a recurrent state [n_v, d_k, d_v], both f32. A slot is a sequence's
// for its whole life (engine/block_tables.h assigns them like block tables); its size does not
// depend on the sequence's length. The pool also remembers how many tokens each slot's state has
// consumed, so a sequence that does not continue exactly where its state ends (a prefix-cache hit
// or a resumed request the state does not cover) is refused instead of silently computed wrong.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/memory.h"
#include "io/model_config.h"

namespace pypto {

class GdnStatePool {
 public:
  GdnStatePool() = default;
  // slots >= 1; the shape from the config (its GDN layers among layers [layer_begin, layer_end)).
  GdnStatePool(const ModelConfig& c, int32_t slots, int32_t gdn_layers);

  // Bytes one sequence's state costs over `gdn_layers` layers of config c.
  static size_t bytes_per_slot(const ModelConfig& c, int32_t gdn_layers);

  int32_t slots() const { return slots_; }
  size_t bytes() const { return storage_.size(); }
  float* conv(int32_t slot, int32_t layer) { return base(slot, layer); }                  // [K - 1, conv_dim]
  float* recurrent(int32_t slot, int32_t layer) { return base(slot, layer) + conv_floats_; }  // [n_v, d_k, d_v]
  // Zeroes the slot's state (a sequence starting at position 0).
  void reset(int32_t slot);
  int64_t tokens(int32_t slot) const { return tokens_[size_t(slot)]; }
  void set_tokens(int32_t slot, int64_t n) { tokens_[size_t(slot)] = n; }

 private:
  float* base(int32_t slot, int32_t layer);
  int32_t slots_ = 0, layers_ = 0;
  size_t conv_floats_ = 0, layer_floats_ = 0;  // per (slot, layer): conv, then recurrent
  AlignedBuffer storage_;
  std::vector<int64_t> tokens_;  // [slots]
};

}  // namespace pypto
