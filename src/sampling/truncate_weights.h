#pragma once
// The vocabulary-wide passes of truncation (top-k / top-p boundary, min-p), written so they
// vectorise (AVX-512 / AVX2 / SSE2 clones picked at run time); each gives the same result as the
// plain per-token loop it replaces, on every CPU.
#include <cstddef>
#include <cstdint>

namespace pypto {

// masses[l] = Σ w[i] over the tokens with w[i] >= thresholds[l] (l < count <= 4), in WeightSum's
// order (exp_weights.h).
void masses_at_least(const float* w, size_t n, const float* thresholds, size_t count, double* masses);

// Zeroes w[i] for the tokens that are not kept: with a boundary (logit bx, id bid; has_boundary),
// the kept tokens are those at least as likely in (logit desc, id asc) order: x[i] > bx, or
// x[i] == bx and i <= bid; and min-p drops w[i] < min_p.
void keep_weights(const float* x, float* w, size_t n, bool has_boundary, float bx, int32_t bid, float min_p);

}  // namespace pypto
