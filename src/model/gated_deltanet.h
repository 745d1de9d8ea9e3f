#pragma once
// The Gated DeltaNet mixer of a Qwen3.5 / Qwen3.6 linear-attention layer (transformers'
// Qwen3_5GatedDeltaNet), over a step's packed sequences:
//   [qkv | z | b | a] = in_proj(h)                                   (one fused linear)
//   c = SiLU(causal depthwise conv_K(qkv)), continuing the sequence's conv state
//   q, k, v = split(c); q, k L2-normed (x · rsqrt(Σx² + 1e-6)), q · 1/sqrt(d_k)
//   g = −exp(A_log) · softplus(a + dt_bias), β = σ(b)                   [n_v]
//   o = gated delta rule (Backend::gated_delta_rule), continuing the sequence's recurrent state
//   out = out_proj( RMSNorm(o; norm) · SiLU(z) )                       per value head over d_v
// By default prefill runs the recurrence token by token like decode, so any chunking of a prompt
// gives bit-identical results; with GdnPrefill::Chunked (--gdn-prefill chunked, model/gdn_prefill.h)
// the whole 64-token chunks of each run of rows between save points take the chunked WY form and
// the rest the recurrence. Either way a row's result never depends on the other sequences of the
// step.
#include <cstdint>
#include <vector>

#include "core/arena.h"
#include "io/model_config.h"
#include "kernels/backend.h"
#include "model/forward_batch.h"
#include "model/gdn_rollback.h"
#include "model/gdn_prefill.h"
#include "model/gdn_state.h"
#include "model/hybrid_weights.h"

namespace pypto {

class GatedDeltaNet {
 public:
  // prefill: GdnPrefill::Chunked needs backend.gdn_chunked_supported(d_k, d_v), else an error
  // naming --gdn-prefill.
  GatedDeltaNet(Backend& backend, const ModelConfig& c, GdnPrefill prefill = GdnPrefill::Recurrent);

  // This step's scratch for T rows (after the arena's reset; shared by every GDN layer).
  void take_scratch(Arena& arena, int64_t T);

  // out [T, hidden] = the mixer of h [T, hidden] (T = batch.num_tokens()); each sequence s reads
  // and updates slot batch.state_slots[s] of `states` at GDN layer index `layer`, and copies this
  // layer's state into the snapshot entries batch.state_saves names, at the rows they name (the
  // sequence's rows run in segments between them: the same arithmetic as one pass, token by token;
  // with GdnPrefill::Chunked each segment's whole 64-token chunks run in the chunked form).
  // A sequence verifying d drafts (batch.draft_rows) also leaves its state after each of its rows
  // n - d .. n - 1 in `rollback` entries 0 .. d - 1 of its slot (model/gdn_rollback.h).
  void forward(const GdnLayerWeights& W, const float* h, const ForwardBatch& batch, GdnStatePool& states,
               int32_t layer, float* out, GdnRollbackStates* rollback = nullptr);

 private:
  // A point inside one sequence's rows where its state is copied out: after `rows` new tokens,
  // into these conv [K - 1, conv_dim] and recurrent [n_v, d_k, d_v] buffers.
  struct SavePoint {
    int64_t rows;
    float* conv;
    float* recurrent;
  };
  void run_rule(int64_t r, int64_t n, float* state, bool chunked);
  // A step of one row per sequence and no save points: conv, norms, gates and recurrence fused
  // per (sequence, key head) (model/gdn_decode.cpp); false (nothing done) for any other step.
  bool decode_fused(const GdnLayerWeights& W, const ForwardBatch& batch, GdnStatePool& states, int32_t layer);
  void finish(const GdnLayerWeights& W, int64_t T, float* out);
  void conv_silu(const GdnLayerWeights& W, int64_t r0, int64_t n, float* conv_state, const std::vector<SavePoint>& saves);

  Backend& backend_;
  int32_t n_k_, n_v_, d_k_, d_v_, K_;
  int64_t key_dim_, value_dim_, conv_dim_, proj_dim_;  // proj_dim = conv_dim + value_dim + 2 n_v
  float eps_;
  GdnPrefill prefill_;
  int64_t rows_ = 0;
  // Scratch: proj [T, proj_dim] (in_proj's output), conv [T, conv_dim] (after conv + SiLU, q and k
  // then normalised in place), g, beta [T, n_v], o [T, n_v, d_v].
  float *proj_ = nullptr, *conv_ = nullptr, *g_ = nullptr, *beta_ = nullptr, *o_ = nullptr;
  float* ba_ = nullptr;  // [T, 2 n_v]: in_proj_ba's output when in_proj is quantized
  std::vector<std::vector<SavePoint>> saves_;  // per sequence of the step, this layer's save points
};

}  // namespace pypto
