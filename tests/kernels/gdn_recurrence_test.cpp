// Backend::gated_delta_rule on every optimised backend this machine runs (AVX2 and AVX-512 along
// d_v where the CPU has them, several thread counts) against the scalar definition
// (gdn_head_scalar), for the published head shapes (d_k = d_v = 128), a tiny one with d_k ≠ d_v,
// a d_v of 24 (three AVX2 vectors, the scalar path on AVX-512), a d_v of 20 (a multiple of
// neither lane count: the scalar path inside every optimised backend) and 150 tokens (the
// kernels' 64-token blocks, a short last one). The vector kernels differ
// only by FMA rounding in their two sums over d_k, each ≤ d_k terms of magnitude ≤ |S|·|k|:
//   |Δout| ≤ 1e-5 · max|out_ref| + 1e-6, and the same bound on the final state.
// A decode-shaped run (one token per call, state carried) must give the same bits as one call
// over all tokens: the recurrence is the same instruction sequence either way. Where the CPU has
// AVX-512, the AVX2 and AVX-512 kernels must give the same bits (one lane, one order).
#include <gtest/gtest.h>

#include <cmath>

#include "core/cpu_features.h"
#include "kernel_test_util.h"
#include "kernels/gdn_recurrence.h"

namespace pypto::test {
namespace {

struct GdnData {
  int64_t n;
  int32_t n_k, n_v, d_k, d_v;
  std::vector<float> qk, v, g, beta, state;  // qk [n, 2 n_k d_k] (q then k per token)
};

void l2rows(float* x, int64_t rows, int32_t d, float scale) {
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int32_t i = 0; i < d; ++i) ss += double(x[r * d + i]) * x[r * d + i];
    const float inv = scale / float(std::sqrt(ss + 1e-6));
    for (int32_t i = 0; i < d; ++i) x[r * d + i] *= inv;
  }
}

GdnData make_data(int64_t n, int32_t n_k, int32_t n_v, int32_t d_k, int32_t d_v, uint32_t seed) {
  GdnData d{n, n_k, n_v, d_k, d_v, {}, {}, {}, {}, {}};
  d.qk = random_f32(size_t(n * 2 * n_k * d_k), seed, -1, 1);
  for (int64_t t = 0; t < n; ++t) {  // as the model feeds it: q scaled by 1/sqrt(d_k), both L2-normed
    l2rows(d.qk.data() + t * 2 * n_k * d_k, n_k, d_k, 1.0f / std::sqrt(float(d_k)));
    l2rows(d.qk.data() + t * 2 * n_k * d_k + int64_t(n_k) * d_k, n_k, d_k, 1.0f);
  }
  d.v = random_f32(size_t(n * n_v * d_v), seed + 1, -2, 2);
  d.g = random_f32(size_t(n * n_v), seed + 2, -3, -0.01f);
  d.beta = random_f32(size_t(n * n_v), seed + 3, 0.05f, 0.95f);
  d.state = random_f32(size_t(n_v) * d_k * d_v, seed + 4, -0.5f, 0.5f);  // a carried-in state
  return d;
}

// Tokens [t0, t1) of d, state in/out in `state`, outputs into out [n, n_v, d_v].
GdnSequence seq(const GdnData& d, int64_t t0, int64_t t1, std::vector<float>& state, std::vector<float>& out) {
  GdnSequence s;
  const int64_t qk = 2 * int64_t(d.n_k) * d.d_k;
  s.q = d.qk.data() + t0 * qk;
  s.k = s.q + int64_t(d.n_k) * d.d_k;
  s.qk_stride = qk;
  s.v = d.v.data() + t0 * d.n_v * d.d_v;
  s.v_stride = int64_t(d.n_v) * d.d_v;
  s.g = d.g.data() + t0 * d.n_v;
  s.beta = d.beta.data() + t0 * d.n_v;
  s.n = t1 - t0;
  s.n_k = d.n_k;
  s.n_v = d.n_v;
  s.d_k = d.d_k;
  s.d_v = d.d_v;
  s.state = state.data();
  s.out = out.data() + t0 * d.n_v * d.d_v;
  return s;
}

// Runs tokens [t0, t1) of d through be.
void run(Backend& be, const GdnData& d, int64_t t0, int64_t t1, std::vector<float>& state, std::vector<float>& out) {
  be.gated_delta_rule(seq(d, t0, t1, state, out));
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  double mx = 0;
  for (float w : want) mx = std::max(mx, double(std::fabs(w)));
  const double tol = 1e-5 * mx + 1e-6;
  for (size_t i = 0; i < got.size(); ++i) ASSERT_LE(std::fabs(got[i] - want[i]), tol) << what << " i=" << i;
}

TEST(GatedDeltaRule, OptimisedMatchesScalarDefinition) {
  auto ref = make_reference_backend();
  const int32_t shapes[][5] = {{7, 2, 4, 16, 32}, {5, 16, 32, 128, 128}, {3, 1, 3, 8, 24}, {1, 4, 4, 32, 16},
                               {4, 1, 2, 8, 20}, {150, 2, 4, 128, 128}};
  for (const auto& c : optimised_cases()) {
    auto opt = make_case(c);
    for (const auto& sh : shapes) {
      const GdnData d = make_data(sh[0], sh[1], sh[2], sh[3], sh[4], 11);
      std::vector<float> s_opt = d.state, s_ref = d.state;
      std::vector<float> o_opt(d.v.size()), o_ref(d.v.size());
      run(*opt, d, 0, d.n, s_opt, o_opt);
      run(*ref, d, 0, d.n, s_ref, o_ref);
      const std::string what = c.label + " n_v=" + std::to_string(d.n_v) + " d_k=" + std::to_string(d.d_k) +
                               " d_v=" + std::to_string(d.d_v);
      expect_close(o_opt, o_ref, what + " out");
      expect_close(s_opt, s_ref, what + " state");
      // Decode-shaped: one token per call, the state carried, gives the same bits.
      std::vector<float> s_dec = d.state, o_dec(d.v.size());
      for (int64_t t = 0; t < d.n; ++t) run(*opt, d, t, t + 1, s_dec, o_dec);
      ASSERT_TRUE(bitwise_equal(o_dec.data(), o_opt.data(), int64_t(o_opt.size()))) << what;
      ASSERT_TRUE(bitwise_equal(s_dec.data(), s_opt.data(), int64_t(s_opt.size()))) << what;
    }
  }
}

// The definition itself against a double-precision evaluation of the recurrence written as the
// matrix update S ← exp(g)(I − β k kᵀ) S + β k vᵀ (the form the fact sheet's chunked algebra
// starts from), so a slip in the loop order of the scalar code cannot pass.
TEST(GatedDeltaRule, ScalarMatchesMatrixForm) {
  const GdnData d = make_data(6, 2, 4, 8, 12, 5);
  auto ref = make_reference_backend();
  std::vector<float> s = d.state, o(d.v.size());
  run(*ref, d, 0, d.n, s, o);
  const int32_t dk = d.d_k, dv = d.d_v, r = d.n_v / d.n_k;
  std::vector<double> S(d.state.begin(), d.state.end());
  for (int64_t t = 0; t < d.n; ++t)
    for (int32_t h = 0; h < d.n_v; ++h) {
      const float* q = d.qk.data() + t * 2 * d.n_k * dk + (h / r) * dk;
      const float* k = q + int64_t(d.n_k) * dk;
      const float* v = d.v.data() + (t * d.n_v + h) * dv;
      const double e = std::exp(double(d.g[t * d.n_v + h])), b = d.beta[t * d.n_v + h];
      double* Sh = S.data() + int64_t(h) * dk * dv;
      std::vector<double> kS(size_t(dv), 0.0), next(size_t(dk) * dv);
      for (int32_t i = 0; i < dk; ++i)
        for (int32_t j = 0; j < dv; ++j) kS[size_t(j)] += k[i] * Sh[i * dv + j];
      for (int32_t i = 0; i < dk; ++i)
        for (int32_t j = 0; j < dv; ++j) next[size_t(i * dv + j)] = e * (Sh[i * dv + j] - b * k[i] * kS[size_t(j)]) + b * k[i] * v[j];
      std::copy(next.begin(), next.end(), Sh);
      for (int32_t j = 0; j < dv; ++j) {
        double acc = 0;
        for (int32_t i = 0; i < dk; ++i) acc += q[i] * Sh[i * dv + j];
        ASSERT_NEAR(o[size_t((t * d.n_v + h) * dv + j)], acc, 1e-4 * (1 + std::fabs(acc))) << "t=" << t << " h=" << h;
      }
    }
}

}  // namespace
}  // namespace pypto::test
