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
  slot_ = arena.alloc_array<int32_t>(pairs);
  xg_ = arena.alloc_array<float>(pairs * size_t(hidden_));
  gate_up_ = arena.alloc_array<float>(pairs * size_t(2 * inter_));
  act_ = arena.alloc_array<float>(pairs * size_t(inter_));
  y_ = arena.alloc_array<float>(pairs * size_t(hidden_));
}

void MoeBlock::forward(const Qwen3LayerWeights& L, const float* h, int64_t T, float* out) {
  const int64_t first = L.expert_first, held = int64_t(L.experts.size());
  PYPTO_ASSERT(L.sparse && held > 0 && first >= 0 && first + held <= experts_, "a sparse layer holding experts [",
               first, ", +", held, ") of ", experts_);
  PYPTO_ASSERT(T <= rows_, "MoE scratch holds ", rows_, " rows, the step has ", T);
  Backend& be = backend_;
  const int64_t H = hidden_, I = inter_, k = top_k_;

  PYPTO_PROF_OP("moe.router");
  be.linear(h, T, L.router, nullptr, logits_);  // logits [T, E]
  be.synchronize();                             // routing is host code
  PYPTO_PROF_OP("host.moe_route");
  be.parallel_rows(T, [&](int64_t t) {
    route_token(logits_ + t * experts_, experts_, top_k_, norm_topk_prob_, topk_expert_ + t * k,
                topk_weight_ + t * k);  // topk_expert, topk_weight [T, k]
  });
  group_by_expert(topk_expert_, topk_weight_, T, experts_, top_k_, offsets_, group_token_, group_weight_);

  // slot [T, k]: token t's pairs in grouped order. Walking the experts in ascending id fills each
  // token's k slots in ascending expert order, the order its sum adds them in. A pair whose
  // expert another rank holds (expert parallelism) gets slot -1 and adds nothing here; the held
  // experts' pairs are the contiguous run [lo, hi) of the grouped order.
  const int32_t lo = offsets_[first], hi = offsets_[first + held];
  std::vector<int32_t>& filled = fill_;
  filled.assign(size_t(T), 0);
  calls_.clear();
  call_begin_.clear();
  for (int32_t e = 0; e < experts_; ++e) {
    const int32_t begin = offsets_[e], n = offsets_[e + 1] - begin;
    if (n == 0) continue;  // an expert no token chose is never read
    const bool here = e >= first && e < first + held;
    for (int32_t r = begin; r < begin + n; ++r) {
      const int32_t t = group_token_[r];
      slot_[int64_t(t) * k + filled[size_t(t)]++] = here ? r : -1;
    }
    if (!here) continue;
    const Qwen3ExpertWeights& X = L.experts[size_t(e - first)];
    calls_.push_back({xg_ + int64_t(begin) * H, n, &X.gate_up, gate_up_ + int64_t(begin) * 2 * I});
    call_begin_.push_back({e, begin});
    expert_bytes_read_ += linear_weight_bytes(be, X.gate_up) + linear_weight_bytes(be, X.down);
  }
  PYPTO_PROF_OP("host.moe_gather");
  be.parallel_rows(hi - lo, [&](int64_t i) {  // xg [P, hidden]: pair p's token row (held pairs)
    const int64_t p = lo + i;
    std::memcpy(xg_ + p * H, h + int64_t(group_token_[p]) * H, sizeof(float) * size_t(H));
  });
  PYPTO_PROF_OP("moe.experts.gate_up");
  be.linear_grouped(calls_.data(), int64_t(calls_.size()));  // gate_up [P, gate (I) | up (I)]
  PYPTO_PROF_OP("moe.experts.silu_mul");
  be.silu_mul(gate_up_ + int64_t(lo) * 2 * I, hi - lo, I, act_ + int64_t(lo) * I);  // act [P, I] (held pairs)
  PYPTO_PROF_OP("moe.experts.down");
  for (size_t i = 0; i < calls_.size(); ++i) {  // the same experts, now act → y
    const auto [e, begin] = call_begin_[i];
    calls_[i] = {act_ + int64_t(begin) * I, calls_[i].m, &L.experts[size_t(e - first)].down, y_ + int64_t(begin) * H};
  }
  be.linear_grouped(calls_.data(), int64_t(calls_.size()));  // y [P, hidden]
  be.synchronize();
  PYPTO_PROF_OP("host.moe_combine");
  be.parallel_rows(T, [&](int64_t t) {  // out[t] = Σ, experts ascending, of w · y
    float* o = out + t * H;
    std::memset(o, 0, sizeof(float) * size_t(H));
    for (int64_t j = 0; j < k; ++j) {
      const int32_t p = slot_[t * k + j];
      if (p < 0) continue;  // held by another rank
      const float* y = y_ + int64_t(p) * H;
      const float wp = group_weight_[p];
      for (int64_t c = 0; c < H; ++c) o[c] += wp * y[c];
    }
  });
}

}  // namespace pypto
