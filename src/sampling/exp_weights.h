#pragma once
// Sampling weights e^(x - max) over a row of the vocabulary, fast and with the same bits on every
// x86-64 CPU. libm's expf per logit was most of a sampled row's time (152k calls, ~0.5 ms per
// row; bench/sampling). exp_weight is a fixed sequence of IEEE operations (no FMA contraction:
// this folder builds with -ffp-contract=off), so the scalar function, its vectorised loops and
// their AVX-512 / AVX2 / SSE2 clones all give the same float for the same input, and a seeded
// request draws the same token on every machine.
#include <bit>
#include <cstddef>

namespace pypto {

// e^d for d <= 0 (d = logit - max), relative error < 3e-7 against e^d in double; exactly 0 below
// -87 (where e^d < 2^-125: a weight 1e-38 of the most likely token's) and for d = -inf.
// d must not be NaN (sanitize_logits runs first) and must be <= 88.
inline float exp_weight(float d) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;        // ln 2 split so n · kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723e-6f;
  const float c = d < -87.0f ? -87.0f : d;
  // n = round(c · log2 e) by truncation of ±0.5 (SSE2 has no rounding instruction).
  const float t = c * kLog2e;
  const int n = static_cast<int>(t < 0.0f ? t - 0.5f : t + 0.5f);
  const float nf = static_cast<float>(n);
  const float r = (c - nf * kLn2Hi) - nf * kLn2Lo;  // |r| <= ln2 / 2
  // e^r by Taylor to r^6 (remainder < r^7 / 7! < 1.3e-7), Horner.
  float p = 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const float scale = std::bit_cast<float>(static_cast<unsigned>(n + 127) << 23);  // 2^n, n in [-126, 127]
  const float e = p * scale;
  return d < -87.0f ? 0.0f : e;
}

// w[i] = exp_weight(x[i] - max) for i < n.
void exp_weights(const float* x, size_t n, float max, float* w);

// Σ_i exp_weight(x[i] - max) in double: 8 running sums over i mod 8, then added in a fixed order.
double sum_exp_weights(const float* x, size_t n, float max);

// Σ_i w[i] in double, in the same fixed order as sum_exp_weights.
double sum_weights(const float* w, size_t n);

// Σ w[i] over the i with w[i] >= threshold, in the same fixed order (the top-p prefilter's mass).
double mass_at_least(const float* w, size_t n, float threshold);

// The same sum built one weight at a time, in increasing i: a row's nonzero weights added here
// give exactly sum_weights of the whole row (adding a zero weight changes no running sum).
struct WeightSum {
  double s[8] = {};
  void add(size_t i, float w) { s[i % 8] += double(w); }
  double total() const { return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7])); }
};

}  // namespace pypto
