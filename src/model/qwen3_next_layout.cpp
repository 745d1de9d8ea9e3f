#include "model/qwen3_next_layout.h"

#include "core/error.h"

namespace pypto {

GroupedGdnRows qwen3_next_gdn_rows(const ModelConfig& c, int64_t k0, int64_t nk) {
  const int64_t n_k = c.linear_num_key_heads, dk = c.linear_key_head_dim, dv = c.linear_value_head_dim;
  PYPTO_ASSERT(n_k > 0 && c.linear_num_value_heads % n_k == 0 && k0 >= 0 && nk > 0 && k0 + nk <= n_k, k0, " ", nk);
  const int64_t r = c.linear_num_value_heads / n_k;
  const int64_t G = 2 * dk + 2 * r * dv;  // rows of one key head's group in in_proj_qkvz
  GroupedGdnRows out;
  // Offsets inside a group of in_proj_qkvz: q at 0, k at d_k, v at 2·d_k, z at 2·d_k + r·d_v.
  const int64_t part_offset[4] = {0, dk, 2 * dk, 2 * dk + r * dv};
  const int64_t part_rows[4] = {dk, dk, r * dv, r * dv};
  for (int part = 0; part < 4; ++part)
    for (int64_t g = k0; g < k0 + nk; ++g) out.qkvz.push_back({g * G + part_offset[part], part_rows[part]});
  for (int part = 0; part < 2; ++part)  // b at 0, a at r inside a group of 2·r rows
    for (int64_t g = k0; g < k0 + nk; ++g) out.ba.push_back({g * 2 * r + part * r, r});
  return out;
}

}  // namespace pypto
