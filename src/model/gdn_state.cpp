#include "model/gdn_state.h"

#include <cstring>

#include "core/error.h"

namespace pypto {
namespace {

size_t conv_floats(const ModelConfig& c) { return size_t(c.linear_conv_kernel_dim - 1) * size_t(c.gdn_conv_dim()); }
// Each (slot, layer) block starts on a 64-byte boundary: 16 floats.
size_t layer_floats(const ModelConfig& c) {
  const size_t n = conv_floats(c) + size_t(c.linear_num_value_heads) * c.linear_key_head_dim * c.linear_value_head_dim;
  return (n + 15) / 16 * 16;
}

}  // namespace

ModelConfig gdn_rank_config(const ModelConfig& c, int tp_size) {
  PYPTO_ASSERT(tp_size >= 1 && c.linear_num_key_heads % tp_size == 0 && c.linear_num_value_heads % tp_size == 0,
               "GDN heads ", c.linear_num_key_heads, "/", c.linear_num_value_heads, " over ", tp_size, " ranks");
  ModelConfig r = c;
  r.linear_num_key_heads /= tp_size;
  r.linear_num_value_heads /= tp_size;
  return r;
}

size_t GdnStatePool::bytes_per_slot(const ModelConfig& c, int32_t gdn_layers) {
  return layer_floats(c) * size_t(gdn_layers) * sizeof(float);
}

GdnStatePool::GdnStatePool(const ModelConfig& c, int32_t slots, int32_t gdn_layers, int32_t snapshots)
    : slots_(slots), snapshots_(snapshots), layers_(gdn_layers), conv_floats_(conv_floats(c)),
      layer_floats_(layer_floats(c)),
      storage_(std::max<size_t>(64, bytes_per_slot(c, gdn_layers) * size_t(slots + snapshots))),
      tokens_(size_t(slots + snapshots), 0) {
  PYPTO_ASSERT(slots >= 1 && snapshots >= 0 && gdn_layers >= 0, "state pool of ", slots, " slots, ", snapshots,
               " snapshots, ", gdn_layers, " layers");
  std::memset(storage_.data(), 0, storage_.size());
}

float* GdnStatePool::base(int32_t index, int32_t layer) {
  PYPTO_ASSERT(index >= 0 && index < slots_ + snapshots_ && layer >= 0 && layer < layers_, "state index ", index,
               " layer ", layer);
  return reinterpret_cast<float*>(storage_.data()) + (size_t(index) * size_t(layers_) + size_t(layer)) * layer_floats_;
}

int32_t GdnStatePool::snapshot_index(int32_t e) const {
  PYPTO_ASSERT(e >= 0 && e < snapshots_, "state snapshot ", e, " outside the pool's ", snapshots_);
  return slots_ + e;
}

void GdnStatePool::reset(int32_t slot) {
  PYPTO_ASSERT(slot >= 0 && slot < slots_, "state slot ", slot);
  if (layers_ > 0)
    std::memset(base(slot, 0), 0, layer_floats_ * size_t(layers_) * sizeof(float));
  tokens_[size_t(slot)] = 0;
}

void GdnStatePool::restore(int32_t slot, int32_t e) {
  PYPTO_ASSERT(slot >= 0 && slot < slots_, "state slot ", slot);
  const int32_t from = snapshot_index(e);
  if (layers_ > 0)  // a slot's layers are contiguous: one copy
    std::memcpy(base(slot, 0), base(from, 0), layer_floats_ * size_t(layers_) * sizeof(float));
  tokens_[size_t(slot)] = tokens_[size_t(from)];
}

}  // namespace pypto
