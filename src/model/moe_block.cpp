#include "model/moe_block.h"

#include <cstring>

#include "core/error.h"
#include "core/profiler.h"
#include "model/moe_router.h"

namespace pypto {

MoeBlock::MoeBlock(Backend& backend, int64_t hidden, int64_t moe_inter, int32_t num_experts, int32_t top_k,
                   bool norm_topk_prob)
    : backend_(backend),
      hidden_(hidden),
      inter_(moe_inter),
      experts_(num_experts),
      top_k_(top_k),
      norm_topk_prob_(norm_topk_prob) {
  PYPTO_ASSERT(hidden > 0 && moe_inter > 0 && num_experts > 0 && top_k >= 1 && top_k <= num_experts,
               "MoE shape: hidden ", hidden, ", I ", moe_inter, ", top-", top_k, " of ", num_experts);
}

void MoeBlock::take_scratch(Arena& arena, int64_t T) {
  rows_ = T;
  const size_t pairs = size_t(T * top_k_);
  logits_ = arena.alloc_array<float>(size_t(T * experts_));
  topk_expert_ = arena.alloc_array<int32_t>(pairs);
  topk_weight_ = arena.alloc_array<float>(pairs);
  offsets_ = arena.alloc_array<int32_t>(size_t(experts_ + 1));
  group_token_ = arena.alloc_array<int32_t>(pairs);
  group_weight_ = arena.alloc_array<float>(pairs);
  // An expert sees each token at most once, so T rows bound its gathered batch.
  xg_ = arena.alloc_array<float>(size_t(T * hidden_));
  gate_up_ = arena.alloc_array<float>(size_t(T * 2 * inter_));
  act_ = arena.alloc_array<float>(size_t(T * inter_));
  y_ = arena.alloc_array<float>(size_t(T * hidden_));
}

void MoeBlock::forward(const Qwen3LayerWeights& L, const float* h, int64_t T, float* out) {
  PYPTO_ASSERT(L.sparse && int32_t(L.experts.size()) == experts_, "a sparse layer with ", L.experts.size(),
               " experts, expected ", experts_);
  PYPTO_ASSERT(T <= rows_, "MoE scratch holds ", rows_, " rows, the step has ", T);
  Backend& be = backend_;
  const int64_t H = hidden_, I = inter_;

  PYPTO_PROF_OP("moe.router");
  be.linear(h, T, L.router, nullptr, logits_);  // logits [T, E]
  be.synchronize();                             // routing is host code
  PYPTO_PROF_OP("host.moe_route");
  be.parallel_rows(T, [&](int64_t t) {
    route_token(logits_ + t * experts_, experts_, top_k_, norm_topk_prob_, topk_expert_ + t * top_k_,
                topk_weight_ + t * top_k_);  // topk_expert, topk_weight [T, k]
  });
  group_by_expert(topk_expert_, topk_weight_, T, experts_, top_k_, offsets_, group_token_, group_weight_);

  std::memset(out, 0, sizeof(float) * size_t(T * H));  // out [T, hidden]
  for (int32_t e = 0; e < experts_; ++e) {  // ascending: the order of every token's sum
    const int32_t begin = offsets_[e], n = offsets_[e + 1] - begin;
    if (n == 0) continue;  // an expert no token chose is never read
    const int32_t* tok = group_token_ + begin;
    const float* w = group_weight_ + begin;
    PYPTO_PROF_OP("host.moe_gather");
    for (int32_t r = 0; r < n; ++r)  // xg [n, hidden]: the rows of the tokens that chose e
      std::memcpy(xg_ + int64_t(r) * H, h + int64_t(tok[r]) * H, sizeof(float) * size_t(H));
    const Qwen3ExpertWeights& X = L.experts[size_t(e)];
    PYPTO_PROF_OP("moe.expert.gate_up");
    be.linear(xg_, n, X.gate_up, nullptr, gate_up_);  // gate_up [n, gate (I) | up (I)]
    PYPTO_PROF_OP("moe.expert.silu_mul");
    be.silu_mul(gate_up_, n, I, act_);                // act [n, I]
    PYPTO_PROF_OP("moe.expert.down");
    be.linear(act_, n, X.down, nullptr, y_);          // y [n, hidden]
    be.synchronize();
    PYPTO_PROF_OP("host.moe_combine");
    for (int32_t r = 0; r < n; ++r) {  // out[tok] += w · y, one f32 multiply-add per element
      float* o = out + int64_t(tok[r]) * H;
      const float* y = y_ + int64_t(r) * H;
      const float wr = w[r];
      for (int64_t c = 0; c < H; ++c) o[c] += wr * y[c];
    }
  }
}

}  // namespace pypto
