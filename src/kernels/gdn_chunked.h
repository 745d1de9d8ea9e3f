#pragma once
// The chunked (WY / UT-transform) form of the gated delta rule for prefill (fact sheet
// qwen35-hybrid.md §4.3), C = 64 tokens per chunk, one value head at a time. Per chunk, with
// γ_i = Σ_{j≤i} g_j (local cumulative log-decay) and Γ_ij = exp(γ_i − γ_j) for j ≤ i:
//   A  = strict_lower(diag(β) K Kᵀ ⊙ Γ)                       [C, C]
//   U  = (I + A)⁻¹ diag(β) V,  W = (I + A)⁻¹ diag(β e^γ) K     forward substitution
//   V' = U − W S                                                the chunk's new values [C, d_v]
//   O  = diag(e^γ) Q S + lower_incl_diag(Q Kᵀ ⊙ Γ) V'          [C, d_v]
//   S  ← e^{γ_C} S + (diag(e^{γ_C − γ}) K)ᵀ V'                 [d_k, d_v]
// It equals the recurrence (kernels/gdn_recurrence.h) up to rounding: the products above are
// matrix products (C×d and d×d blocks, AVX-512 or AVX2 FMAs with register blocking; the AVX2
// one is cpu/gdn_chunked_impl.h) instead of rank-1 updates of the state per token. Every output depends
// only on its own head's rows and state, and chunks start at the call's first row: a caller that
// splits a prefill at multiples of C gets bitwise the result of one call
// (tests/kernels/gdn_chunked_test.cpp).
#include <cstdint>

#include "kernels/backend.h"

namespace pypto::cpu {

inline constexpr int32_t kGdnChunk = 64;

// Value head h of s over its n tokens in chunks of kGdnChunk (the last one may be shorter),
// reading and updating the head's state. AVX-512; d_k and d_v multiples of 16, at most 256.
void gdn_head_chunked_avx512(const GdnSequence& s, int32_t h);
// The same with AVX2 + FMA (8 lanes); d_k and d_v multiples of 8, at most 256.
void gdn_head_chunked_avx2(const GdnSequence& s, int32_t h);

// The same head with the chunk's matrix products on AVX-512 BF16 dot products (VDPBF16PS, f32
// accumulation, the state in f32; cpu/gdn_chunked_bf16_avx512.cpp). parts = 1: operands rounded
// to bf16; parts = 3: each operand split into bf16 hi + lo, three dot products per pair (about f32
// accuracy). Needs AVX512_BF16; same shape limits as gdn_head_chunked_avx512.
void gdn_head_chunked_bf16_avx512(const GdnSequence& s, int32_t h, int32_t parts);

}  // namespace pypto::cpu
