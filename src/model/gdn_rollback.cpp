#include "model/gdn_rollback.h"

#include <cstring>

#include "core/error.h"

namespace pypto {

GdnRollbackStates::GdnRollbackStates(const ModelConfig& c, int32_t slots, int32_t gdn_layers, int32_t depth)
    : slots_(slots), depth_(depth), layers_(gdn_layers),
      conv_floats_(size_t(c.linear_conv_kernel_dim - 1) * size_t(c.gdn_conv_dim())),
      recurrent_floats_(size_t(c.linear_num_value_heads) * size_t(c.linear_key_head_dim) * size_t(c.linear_value_head_dim)),
      layer_floats_((conv_floats_ + recurrent_floats_ + 15) / 16 * 16),  // 64-byte aligned blocks
      storage_(std::max<size_t>(64, layer_floats_ * sizeof(float) * size_t(gdn_layers) * size_t(slots) * size_t(depth))),
      tokens_(size_t(slots) * size_t(depth), -1) {
  PYPTO_ASSERT(slots >= 0 && depth >= 0 && gdn_layers >= 0, "rollback store of ", slots, " slots x ", depth);
}

size_t GdnRollbackStates::index(int32_t slot, int32_t entry) const {
  PYPTO_ASSERT(slot >= 0 && slot < slots_ && entry >= 0 && entry < depth_, "rollback entry ", entry, " of slot ", slot,
               " outside ", slots_, " x ", depth_);
  return size_t(slot) * size_t(depth_) + size_t(entry);
}

float* GdnRollbackStates::base(int32_t slot, int32_t entry, int32_t layer) {
  PYPTO_ASSERT(layer >= 0 && layer < layers_, "rollback layer ", layer);
  return reinterpret_cast<float*>(storage_.data()) + (index(slot, entry) * size_t(layers_) + size_t(layer)) * layer_floats_;
}

void GdnRollbackStates::forget(int32_t slot) {
  for (int32_t e = 0; e < depth_; ++e) tokens_[index(slot, e)] = -1;
}

bool GdnRollbackStates::roll_back(GdnStatePool& pool, int32_t slot, int64_t position) {
  for (int32_t e = 0; e < depth_; ++e) {
    if (tokens_[index(slot, e)] != position) continue;
    for (int32_t l = 0; l < layers_; ++l) {
      std::memcpy(pool.conv(slot, l), conv(slot, e, l), conv_floats_ * sizeof(float));
      std::memcpy(pool.recurrent(slot, l), recurrent(slot, e, l), recurrent_floats_ * sizeof(float));
    }
    pool.set_tokens(slot, position);
    ++rollbacks_;
    return true;
  }
  return false;
}

}  // namespace pypto
