#pragma once
// Truncation's pass over the vocabulary (top-k / top-p boundary, min-p), written so it vectorises
// (AVX-512 / AVX2 / SSE2 clones picked at run time); the same result as the plain per-token loop,
// on every CPU. (The top-p prefilter's masses: mass_at_least, exp_weights.h.)
#include <cstddef>
#include <cstdint>

namespace pypto {

// Zeroes w[i] for the tokens that are not kept: with a boundary (logit bx, id bid; has_boundary),
// the kept tokens are those at least as likely in (logit desc, id asc) order: x[i] > bx, or
// x[i] == bx and i <= bid; and min-p drops w[i] < min_p.
void keep_weights(const float* x, float* w, size_t n, bool has_boundary, float bx, int32_t bid, float min_p);

}  // namespace pypto
