#pragma once
// Qwen3-Next's Gated DeltaNet input projections (transformers' modeling_qwen3_next.py,
// Qwen3NextGatedDeltaNet.fix_query_key_value_ordering) and where their rows go in the layout our
// GDN forward reads (model/gated_deltanet.h: in_proj rows [q | k | v | z | b | a], q and k head-major
// over the key heads, v and z head-major over the value heads).
//
// With n_k key heads of d_k, n_v value heads of d_v and r = n_v / n_k value heads per key head:
//   in_proj_qkvz.weight [2·n_k·d_k + 2·n_v·d_v, H] is n_k groups of G = 2·d_k + 2·r·d_v rows; group g
//     holds q_g (d_k rows), k_g (d_k), v of value heads g·r .. g·r + r − 1 (r·d_v), z of the same (r·d_v).
//   in_proj_ba.weight [2·n_v, H] is n_k groups of 2·r rows: b of value heads g·r .. g·r + r − 1 (r),
//     then their a (r).
// The regrouping only reorders rows (a linear's output rows are independent), so it happens at
// staging on row ranges of the mapped tensors; conv1d, dt_bias, A_log, the norm and out_proj are
// already in the q | k | v / value-head order the forward uses.
#include <cstdint>
#include <string>
#include <vector>

#include "io/model_config.h"

namespace pypto {

// Qwen3NextForCausalLM: the GDN input projections are in_proj_qkvz / in_proj_ba as above
// (Qwen3.5's are in_proj_qkv / z / b / a).
inline bool gdn_grouped_projections(const ModelConfig& c) { return c.architecture == "Qwen3NextForCausalLM"; }

struct RowRange {
  int64_t begin, rows;  // rows [begin, begin + rows) of a 2-D [rows, H] tensor
};

// The rows of key heads [k0, k0 + nk) (with their value heads [k0·r, (k0 + nk)·r)), in our order.
struct GroupedGdnRows {
  std::vector<RowRange> qkvz;  // of in_proj_qkvz: [q (nk·d_k) | k (nk·d_k) | v (nk·r·d_v) | z (nk·r·d_v)]
  std::vector<RowRange> ba;    // of in_proj_ba:   [b (nk·r) | a (nk·r)]
};
GroupedGdnRows qwen3_next_gdn_rows(const ModelConfig& c, int64_t k0, int64_t nk);

}  // namespace pypto
