#pragma once
// The MLP of a Qwen3-MoE sparse layer: route each token to its top-k experts (moe_router.h), run
// every chosen expert's SwiGLU on the rows of the tokens that chose it, and sum the weighted
// outputs per token. Written against the backend op table, like the rest of the forward pass.
#include <cstdint>
#include <utility>
#include <vector>

#include "core/arena.h"
#include "kernels/backend.h"
#include "model/qwen3_weights.h"

namespace pypto {

class MoeBlock {
 public:
  // hidden: the model width; moe_inter: an expert's width I; the routing shape from the config.
  MoeBlock(Backend& backend, int64_t hidden, int64_t moe_inter, int32_t num_experts, int32_t top_k,
           bool norm_topk_prob);

  // Takes this step's scratch for T token rows from `arena` (once per step, after its reset; the
  // buffers are reused by every sparse layer of the step).
  void take_scratch(Arena& arena, int64_t T);

  // out [T, hidden] = Σ over the experts e token t chose, in ascending e, of
  //   weight[t, e] · down_e(silu(gate_e(h[t])) · up_e(h[t])),
  // over the experts L holds (L.experts: ids L.expert_first + j) and with their columns L holds:
  // under --tp a partial sum that the caller's all-reduce completes. Routing always sees every expert.
  // The chosen experts run together: one grouped linear (Backend::linear_grouped, one job of
  // (expert, column tile) pieces) for every gate_up, one for every down. Batch invariance: each
  // expert's products are the backend's row-invariant linears on its gathered rows, and every
  // token's sum starts at 0 and adds its experts in ascending id, so a row's result does not
  // depend on which other rows share the step or the expert.
  void forward(const Qwen3LayerWeights& L, const float* h, int64_t T, float* out);

  // Bytes of expert weights the forward calls so far have read (each chosen expert's gate_up and
  // down as staged, once per call that used it): with the router and the dense parts, what a
  // step must read, the bound bench/model/bench_moe compares a step against.
  uint64_t expert_bytes_read() const { return expert_bytes_read_; }

 private:
  Backend& backend_;
  int64_t hidden_, inter_;
  int32_t experts_, top_k_;
  bool norm_topk_prob_;
  int64_t rows_ = 0;  // T of the current scratch
  uint64_t expert_bytes_read_ = 0;
  // Scratch, per step: logits [T, E] (then probabilities); topk_expert, topk_weight [T, k];
  // offsets [E + 1], group_token, group_weight [T * k] (the pairs grouped by expert, ascending);
  // slot [T * k] (token t's j-th pair in grouped order, its experts ascending); and per grouped
  // pair p: xg [T * k, hidden] (its token's row), gate_up [T * k, 2I], act [T * k, I],
  // y [T * k, hidden].
  float* logits_ = nullptr;
  int32_t* topk_expert_ = nullptr;
  float* topk_weight_ = nullptr;
  int32_t* offsets_ = nullptr;
  int32_t* group_token_ = nullptr;
  float* group_weight_ = nullptr;
  int32_t* slot_ = nullptr;
  float *xg_ = nullptr, *gate_up_ = nullptr, *act_ = nullptr, *y_ = nullptr;
  std::vector<Backend::LinearCall> calls_;  // one per chosen expert (grow only)
  std::vector<int32_t> fill_;               // [T] slots of each token filled so far
  std::vector<std::pair<int32_t, int32_t>> call_begin_;  // calls_[i]: (expert, first grouped pair)
};

}  // namespace pypto
