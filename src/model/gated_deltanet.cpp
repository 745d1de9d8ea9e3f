#include "model/gated_deltanet.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/profiler.h"
#include "kernels/gdn_chunked.h"
#include "model/gdn_math.h"

namespace pypto {

using gdn::l2norm;
using gdn::silu;

GatedDeltaNet::GatedDeltaNet(Backend& backend, const ModelConfig& c, GdnPrefill prefill)
    : backend_(backend),
      n_k_(c.linear_num_key_heads),
      n_v_(c.linear_num_value_heads),
      d_k_(c.linear_key_head_dim),
      d_v_(c.linear_value_head_dim),
      K_(c.linear_conv_kernel_dim),
      key_dim_(c.gdn_key_dim()),
      value_dim_(c.gdn_value_dim()),
      conv_dim_(c.gdn_conv_dim()),
      proj_dim_(c.gdn_conv_dim() + c.gdn_value_dim() + 2 * int64_t(c.linear_num_value_heads)),
      eps_(float(c.rms_norm_eps)),
      prefill_(prefill) {
  PYPTO_ASSERT(n_k_ > 0 && n_v_ % n_k_ == 0 && d_k_ > 0 && d_v_ > 0 && K_ >= 1, "GDN shape");
  if (prefill_ == GdnPrefill::Chunked && !backend_.gdn_chunked_supported(d_k_, d_v_))
    fail("--gdn-prefill chunked: backend ", backend_.name(), " has no chunked gated delta rule for linear_key_head_dim ",
         d_k_, " / linear_value_head_dim ", d_v_, " (it needs AVX2 or AVX-512 and head dims that are multiples of 16, "
         "at most 256); use --gdn-prefill recurrent");
}

void GatedDeltaNet::take_scratch(Arena& arena, int64_t T) {
  rows_ = T;
  proj_ = arena.alloc_array<float>(size_t(T * proj_dim_));
  ba_ = arena.alloc_array<float>(size_t(T * 2 * n_v_));
  conv_ = arena.alloc_array<float>(size_t(T * conv_dim_));
  g_ = arena.alloc_array<float>(size_t(T * n_v_));
  beta_ = arena.alloc_array<float>(size_t(T * n_v_));
  o_ = arena.alloc_array<float>(size_t(T * value_dim_));
}

// Rows [r0, r0 + n) of one sequence: conv_[t, c] = SiLU(Σ_j W[c, j] · x_{t−K+1+j}[c]) over the
// sequence's history (conv_state [K − 1, C], oldest first) then its new qkv rows; the state is left
// holding the last K − 1 rows, and after `rows` of them each save point gets the state as it was
// then. Channels are independent: split over the backend's threads in blocks of kChunk, each block
// walked row by row so every read of proj_ [T, P] and write of conv_ [T, C] is a contiguous run
// (a channel-by-channel walk strides P floats per row: at 512 rows of the 35B-A3B shape it took
// 57 ms a layer). Per channel the sum runs j = 0 .. K−1 in that order, as before.
void GatedDeltaNet::conv_silu(const GdnLayerWeights& W, int64_t r0, int64_t n, float* conv_state,
                              const std::vector<SavePoint>& saves) {
  if (n == 0) return;
  const int64_t C = conv_dim_, P = proj_dim_;
  const int32_t K = K_, hist = K_ - 1;
  constexpr int64_t kChunk = 256;  // channels per task
  // Input row u of the window, relative to the first new row: u < 0 is conv_state's row hist + u.
  auto input = [&](int64_t u) -> const float* {
    return u >= 0 ? proj_ + (r0 + u) * P : conv_state + (hist + u) * C;
  };
  backend_.parallel_rows((C + kChunk - 1) / kChunk, [&](int64_t chunk) {
    const int64_t c0 = chunk * kChunk, nc = std::min(C, c0 + kChunk) - c0;
    float w[16 * kChunk];  // this block's taps, tap-major [K, nc] (K <= 16 checked at load)
    for (int64_t c = 0; c < nc; ++c)
      for (int32_t j = 0; j < K; ++j) w[j * kChunk + c] = W.conv[(c0 + c) * K + j];
    float acc[kChunk];
    const float* x[16];
    size_t next = 0;  // the next save point
    for (int64_t t = 0; t < n; ++t) {
      for (int32_t j = 0; j < K; ++j) x[j] = input(t - hist + j) + c0;
      gdn::conv_silu_row(w, kChunk, x, K, nc, acc, conv_ + (r0 + t) * C + c0);
      for (; next < saves.size() && saves[next].rows == t + 1; ++next)
        for (int32_t j = 0; j < hist; ++j)
          std::copy_n(input(t + 1 - hist + j) + c0, nc, saves[next].conv + int64_t(j) * C + c0);
    }
    // The last hist inputs become the state. Row j reads input n − hist + j: a new row, or the old
    // state's row n + j > j, not yet overwritten when j ascends.
    for (int32_t j = 0; j < hist; ++j) std::copy_n(input(n - hist + j) + c0, nc, conv_state + int64_t(j) * C + c0);
  });
}

// The gated delta rule over rows [r, r + n) of the step (one sequence's, continuing `state`
// [n_v, d_k, d_v]); their outputs land in o_ [n, n_v, d_v].
void GatedDeltaNet::run_rule(int64_t r, int64_t n, float* state, bool chunked) {
  const int64_t C = conv_dim_;
  GdnSequence q;
  q.q = conv_ + r * C;
  q.k = conv_ + r * C + key_dim_;
  q.qk_stride = C;
  q.v = conv_ + r * C + 2 * key_dim_;
  q.v_stride = C;
  q.g = g_ + r * n_v_;
  q.beta = beta_ + r * n_v_;
  q.n = n;
  q.n_k = n_k_;
  q.n_v = n_v_;
  q.d_k = d_k_;
  q.d_v = d_v_;
  q.state = state;
  q.out = o_ + r * value_dim_;
  if (chunked) {
    PYPTO_PROF_OP("gdn.chunked");
    backend_.gated_delta_rule_chunked(q);
  } else {
    PYPTO_PROF_OP("gdn.recurrence");
    backend_.gated_delta_rule(q);
  }
  backend_.synchronize();
}

void GatedDeltaNet::forward(const GdnLayerWeights& W, const float* h, const ForwardBatch& batch, GdnStatePool& states,
                            int32_t layer, float* out, GdnRollbackStates* rollback) {
  Backend& be = backend_;
  const int64_t T = batch.num_tokens(), P = proj_dim_, C = conv_dim_;
  PYPTO_ASSERT(T <= rows_, "GDN scratch holds ", rows_, " rows, the step has ", T);
  PYPTO_ASSERT(int32_t(batch.state_slots.size()) == batch.num_seqs(), "a hybrid batch without state slots");
  PYPTO_PROF_OP("gdn.in_proj");
  if (W.in_proj_ba.n_out == 0) {
    be.linear(h, T, W.in_proj, nullptr, proj_);  // proj [T, qkv (C) | z (n_v d_v) | b (n_v) | a (n_v)]
  } else {
    // Quantized in_proj [qkv | z] and float [b | a]: the rows [T, C + n_v d_v] land packed at the
    // front of proj_, then move to their stride P from the last row down (a row never overwrites
    // one not yet moved, P > C + n_v d_v), and b | a fill each row's tail.
    const int64_t QZ = W.in_proj.n_out, BA = W.in_proj_ba.n_out;
    PYPTO_ASSERT(QZ + BA == P, "in_proj ", QZ, " + in_proj_ba ", BA, " rows, expected ", P);
    be.linear(h, T, W.in_proj, nullptr, proj_);
    be.linear(h, T, W.in_proj_ba, nullptr, ba_);
    be.synchronize();
    for (int64_t t = T - 1; t >= 0; --t) {
      std::memmove(proj_ + t * P, proj_ + t * QZ, size_t(QZ) * sizeof(float));
      std::memcpy(proj_ + t * P + QZ, ba_ + t * BA, size_t(BA) * sizeof(float));
    }
  }
  be.synchronize();

  // Each sequence's save points at this layer (ForwardBatch::state_saves, ordered by rows).
  saves_.resize(size_t(batch.num_seqs()));
  for (std::vector<SavePoint>& v : saves_) v.clear();
  for (const ForwardBatch::StateSave& v : batch.state_saves)
    saves_[size_t(v.seq)].push_back(
        {v.rows, states.snapshot_conv(v.entry, layer), states.snapshot_recurrent(v.entry, layer)});
  // Speculative verify rows: the state after each row before a draft (rollback entries 0 .. d-1).
  for (size_t s = 0; s < batch.draft_rows.size(); ++s) {
    const int32_t d = batch.draft_rows[s];
    if (d == 0) continue;
    PYPTO_ASSERT(rollback != nullptr && d <= rollback->depth(), "sequence ", s, " verifies ", d,
                 " drafts without rollback entries for them");
    const int64_t n = batch.query_start[s + 1] - batch.query_start[s];
    const int32_t slot = batch.state_slots[s];
    for (int32_t j = 0; j < d; ++j)
      saves_[s].push_back({n - d + j, rollback->conv(slot, j, layer), rollback->recurrent(slot, j, layer)});
    std::stable_sort(saves_[s].begin(), saves_[s].end(),
                     [](const SavePoint& a, const SavePoint& b) { return a.rows < b.rows; });
  }

  PYPTO_PROF_OP("gdn.decode_fused");
  if (decode_fused(W, batch, states, layer)) return finish(W, T, out);

  PYPTO_PROF_OP("gdn.conv");
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int64_t r0 = batch.query_start[size_t(s)], n = batch.query_start[size_t(s) + 1] - r0;
    conv_silu(W, r0, n, states.conv(batch.state_slots[size_t(s)], layer), saves_[size_t(s)]);
  }

  PYPTO_PROF_OP("gdn.gates");
  const float q_scale = 1.0f / std::sqrt(float(d_k_));
  be.parallel_rows(T, [&](int64_t t) {
    float* row = conv_ + t * C;
    for (int32_t i = 0; i < n_k_; ++i) {
      l2norm(row + int64_t(i) * d_k_, d_k_, q_scale);             // q
      l2norm(row + key_dim_ + int64_t(i) * d_k_, d_k_, 1.0f);     // k
    }
    const float* b = proj_ + t * P + C + value_dim_;
    gdn::gates(b, b + n_v_, W.neg_exp_a, W.dt_bias, 0, n_v_, beta_ + t * n_v_, g_ + t * n_v_);
  });

  PYPTO_PROF_OP("gdn.recurrence");
  const size_t state_floats = size_t(n_v_) * size_t(d_k_) * size_t(d_v_);
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int64_t r0 = batch.query_start[size_t(s)], n = batch.query_start[size_t(s) + 1] - r0;
    float* state = states.recurrent(batch.state_slots[size_t(s)], layer);
    // Rows [done, to) per segment: the recurrence is token by token, so segments between save
    // points compute exactly what one call over all n rows would. With --gdn-prefill chunked a
    // segment's whole 64-token chunks (counted from the segment's first row) go through the chunked
    // form first, the rest (< 64 rows: decode, verify rows, a prompt's tail) through the recurrence.
    int64_t done = 0;
    auto run = [&](int64_t to) {
      if (to == done) return;
      const int64_t whole = prefill_ == GdnPrefill::Chunked ? (to - done) / cpu::kGdnChunk * cpu::kGdnChunk : 0;
      if (whole > 0) {
        run_rule(r0 + done, whole, state, /*chunked=*/true);
        done += whole;
        if (to == done) return;
      }
      run_rule(r0 + done, to - done, state, /*chunked=*/false);
      done = to;
    };
    for (const SavePoint& p : saves_[size_t(s)]) {
      PYPTO_ASSERT(p.rows >= done && p.rows <= n, "state save after ", p.rows, " of ", n, " rows");
      run(p.rows);
      std::memcpy(p.recurrent, state, state_floats * sizeof(float));
    }
    run(n);
  }

  finish(W, T, out);
}

// o [T, n_v, d_v] → out [T, hidden]: the gated RMSNorm with SiLU(z), then out_proj.
void GatedDeltaNet::finish(const GdnLayerWeights& W, int64_t T, float* out) {
  Backend& be = backend_;
  const int64_t P = proj_dim_, C = conv_dim_;
  PYPTO_PROF_OP("gdn.gated_norm");
  be.rms_norm(o_, W.norm, T * n_v_, d_v_, eps_, o_);  // per value head over d_v
  be.synchronize();
  be.parallel_rows(T, [&](int64_t t) {
    const float* z = proj_ + t * P + C;
    float* o = o_ + t * value_dim_;
    for (int64_t i = 0; i < value_dim_; ++i) o[i] *= silu(z[i]);
  });
  PYPTO_PROF_OP("gdn.out_proj");
  be.linear(o_, T, W.out_proj, nullptr, out);  // out [T, hidden]
}

}  // namespace pypto
