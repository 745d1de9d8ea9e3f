// The Gated DeltaNet's fused decode path: a step whose sequences each bring one new row (decode)
// runs the causal conv, the q / k L2 norms, the gates and the recurrence as one parallel job per
// (sequence, key head) instead of three passes over the step with a hand-over between them. A job
// owns its key head's q and k channels and the v channels of the r = n_v / n_k value heads that
// read them, so it can carry a row from in_proj's output to the rule's output alone: the conv of
// its channels (and their conv state), the norms of its q and k, the gates and the recurrence of
// its value heads. Every value is computed by the same functions, in the same order, as the
// step-wide path (model/gdn_math.h, Backend::gated_delta_rule_head), so a row's bits do not depend
// on which path ran it (tests/model batch_invariance: a prompt fed one token per step against one
// pass).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "model/gated_deltanet.h"
#include "model/gdn_math.h"

namespace pypto {

bool GatedDeltaNet::decode_fused(const GdnLayerWeights& W, const ForwardBatch& batch, GdnStatePool& states,
                                 int32_t layer) {
  const int32_t S = batch.num_seqs();
  for (int32_t s = 0; s < S; ++s)
    if (batch.query_start[size_t(s) + 1] - batch.query_start[size_t(s)] != 1 || !saves_[size_t(s)].empty())
      return false;  // prompt chunks, verify rows or save points: the step-wide path
  const int64_t C = conv_dim_, P = proj_dim_;
  const int32_t K = K_, hist = K_ - 1, r = n_v_ / n_k_;
  const float q_scale = 1.0f / std::sqrt(float(d_k_));
  constexpr int64_t kBlock = 256;  // channels per conv block (the step-wide path's kChunk)
  backend_.parallel_rows(int64_t(S) * n_k_, [&](int64_t job) {
    const int32_t s = int32_t(job / n_k_), i = int32_t(job % n_k_);
    const int64_t row = batch.query_start[size_t(s)];
    const int32_t slot = batch.state_slots[size_t(s)];
    float* conv_state = states.conv(slot, layer);  // [K − 1, C], oldest first
    const float* prow = proj_ + row * P;
    float* crow = conv_ + row * C;
    // Conv + SiLU of channels [c0, c0 + n), then the window moves on by the new row.
    auto conv = [&](int64_t c0, int64_t n) {
      float w[16 * kBlock], acc[kBlock];
      const float* x[16];
      for (int64_t b0 = c0; b0 < c0 + n; b0 += kBlock) {
        const int64_t nc = std::min(c0 + n, b0 + kBlock) - b0;
        for (int64_t c = 0; c < nc; ++c)
          for (int32_t j = 0; j < K; ++j) w[j * kBlock + c] = W.conv[(b0 + c) * K + j];
        for (int32_t j = 0; j < K; ++j) x[j] = (j < hist ? conv_state + int64_t(j) * C : prow) + b0;
        gdn::conv_silu_row(w, kBlock, x, K, nc, acc, crow + b0);
        for (int32_t j = 0; j + 1 < hist; ++j)
          std::copy_n(conv_state + int64_t(j + 1) * C + b0, nc, conv_state + int64_t(j) * C + b0);
        if (hist > 0) std::copy_n(prow + b0, nc, conv_state + int64_t(hist - 1) * C + b0);
      }
    };
    conv(int64_t(i) * d_k_, d_k_);                                  // q of key head i
    conv(key_dim_ + int64_t(i) * d_k_, d_k_);                       // k of key head i
    conv(2 * key_dim_ + int64_t(i) * r * d_v_, int64_t(r) * d_v_);  // v of its value heads
    gdn::l2norm(crow + int64_t(i) * d_k_, d_k_, q_scale);
    gdn::l2norm(crow + key_dim_ + int64_t(i) * d_k_, d_k_, 1.0f);
    const float* b = prow + C + value_dim_;
    gdn::gates(b, b + n_v_, W.neg_exp_a, W.dt_bias, i * r, (i + 1) * r, beta_ + row * n_v_, g_ + row * n_v_);
    GdnSequence q;
    q.q = crow;
    q.k = crow + key_dim_;
    q.qk_stride = C;
    q.v = crow + 2 * key_dim_;
    q.v_stride = C;
    q.g = g_ + row * n_v_;
    q.beta = beta_ + row * n_v_;
    q.n = 1;
    q.n_k = n_k_;
    q.n_v = n_v_;
    q.d_k = d_k_;
    q.d_v = d_v_;
    q.state = states.recurrent(slot, layer);
    q.out = o_ + row * value_dim_;
    for (int32_t h = i * r; h < (i + 1) * r; ++h) backend_.gated_delta_rule_head(q, h);
  });
  return true;
}

}  // namespace pypto
