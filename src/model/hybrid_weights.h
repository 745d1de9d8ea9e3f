#pragma once
// Staged weights of the Qwen3.5 / Qwen3.6 hybrid layers (model/hybrid_staging.h builds them;
// Qwen3LayerWeights holds them). Norm weights are staged with the zero-centred (1 + w) already
// added, so the plain rms_norm op computes transformers' Qwen3_5RMSNorm; the GDN output norm is
// the one plain weight.
#include <cstdint>

#include "kernels/backend.h"

namespace pypto {

// What a decoder layer mixes its tokens with.
enum class LayerMixer : uint8_t {
  Attention,       // Qwen3 / Qwen2 attention
  GatedAttention,  // Qwen3.5 full attention: qkv rows [q | k | v | gate], output · sigmoid(gate)
  GatedDeltaNet,   // Qwen3.5 linear attention (model/gated_deltanet.h)
};

// One Gated DeltaNet layer. C = conv_dim = 2 n_k d_k + n_v d_v (q | k | v channels).
struct GdnLayerWeights {
  // The input projections fused by rows, [rows, hidden]: float weights hold all four,
  // [qkv (C) | z (n_v d_v) | b (n_v) | a (n_v)]; quantized ones (--quantization) only
  // [qkv (C) | z (n_v d_v)], with the small b and a projections kept float in in_proj_ba.
  LinearWeight in_proj;
  LinearWeight in_proj_ba;  // [2 n_v, hidden]: [b (n_v) | a (n_v)]; n_out 0 when in_proj holds them
  const float* conv = nullptr;     // [C, K] f32: the depthwise causal conv taps, oldest first
  const float* dt_bias = nullptr;  // [n_v] f32
  const float* neg_exp_a = nullptr;  // [n_v] f32: -exp(A_log), the decay rate per value head
  const float* norm = nullptr;     // [d_v] f32: the gated RMSNorm's weight (plain, not 1 + w)
  LinearWeight out_proj;           // [hidden, n_v d_v]
};

// Qwen3.5-MoE's shared expert, added to the routed experts' sum scaled by sigmoid(gate · x).
struct SharedExpertWeights {
  LinearWeight gate_up;  // [2 I_s, hidden]: rows [gate (I_s) | up (I_s)]; n_out 0 when the layer has none
  LinearWeight down;     // [hidden, I_s]
  LinearWeight gate;     // [1, hidden]
};

}  // namespace pypto
