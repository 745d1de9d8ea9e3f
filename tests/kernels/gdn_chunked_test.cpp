// The chunked (WY, C = 64) gated delta rule (kernels/gdn_chunked.h) against the scalar recurrence
// (gdn_head_scalar), on the published head shapes (d_k = d_v = 128, value heads grouped 2 per key
// head) and a small one, over 1, 2 and 3+ chunks with a short last chunk, from a carried-in state.
// The chunked form sums in another order (products of decays, a triangular solve): stated
// tolerance |Δ| ≤ 1e-5 · max|ref| + 1e-6 for every output and for the final state (measured on
// AMD EPYC Zen 5: ≤ 2.4e-6 · max|ref|), for each f32 kernel this CPU runs (AVX2, AVX-512); the
// bf16 dot-product kernel (gdn_head_chunked_bf16_avx512) is held to kBf16x3Tolerance /
// kBf16Tolerance below. Invariance (every kernel): a head's result is bitwise the same whatever
// other heads run beside it, and splitting the rows at a multiple of 64 into two calls (the state
// carried) gives one call's bits. Where the CPU has AVX-512, the AVX2 and AVX-512 f32 kernels give
// the same bits (each element sums the same terms in the same order).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdio>

#include "core/cpu_features.h"
#include "kernel_test_util.h"
#include "kernels/gdn_chunked.h"
#include "kernels/gdn_recurrence.h"

namespace pypto::test {
namespace {

struct Data {
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

// As the model feeds the kernel: q, k L2-normed (q also / sqrt(d_k)), g = log-decay in
// [−3, −0.01], β in (0, 1), a carried-in state.
Data make(int64_t n, int32_t n_k, int32_t n_v, int32_t d_k, int32_t d_v, uint32_t seed) {
  Data d{n, n_k, n_v, d_k, d_v, {}, {}, {}, {}, {}};
  d.qk = random_f32(size_t(n * 2 * n_k * d_k), seed, -1, 1);
  for (int64_t t = 0; t < n; ++t) {
    l2rows(d.qk.data() + t * 2 * n_k * d_k, n_k, d_k, 1.0f / std::sqrt(float(d_k)));
    l2rows(d.qk.data() + t * 2 * n_k * d_k + int64_t(n_k) * d_k, n_k, d_k, 1.0f);
  }
  d.v = random_f32(size_t(n * n_v * d_v), seed + 1, -2, 2);
  d.g = random_f32(size_t(n * n_v), seed + 2, -3, -0.01f);
  d.beta = random_f32(size_t(n * n_v), seed + 3, 0.05f, 0.95f);
  d.state = random_f32(size_t(n_v) * d_k * d_v, seed + 4, -0.5f, 0.5f);
  return d;
}

GdnSequence seq(const Data& d, int64_t t0, int64_t t1, std::vector<float>& state, std::vector<float>& out) {
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

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what,
                  double rel = 1e-5, double abs = 1e-6) {
  double mx = 0, worst = 0;
  for (float w : want) mx = std::max(mx, double(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, double(std::fabs(got[i] - want[i])));
  EXPECT_LE(worst, rel * mx + abs) << what << ": max|Δ| " << worst << " at max|ref| " << mx;
  std::printf("%s: max|Δ| %.3g at max|ref| %.3g\n", what.c_str(), worst, mx);  // the figure docs/status.md quotes
  EXPECT_TRUE(std::isfinite(worst)) << what;
}

using HeadKernel = void (*)(const GdnSequence&, int32_t);

struct F32Kernel {
  const char* name;
  HeadKernel run;
};

// The f32 chunked kernels this CPU runs.
std::vector<F32Kernel> f32_kernels() {
  std::vector<F32Kernel> ks;
  if (cpu_supports(Isa::Avx2)) ks.push_back({"avx2", cpu::gdn_head_chunked_avx2});
  if (cpu_supports(Isa::Avx512)) ks.push_back({"avx512", cpu::gdn_head_chunked_avx512});
  return ks;
}

TEST(GatedDeltaRuleChunked, MatchesTheRecurrence) {
  if (f32_kernels().empty()) GTEST_SKIP() << "the chunked kernels need AVX2 or AVX-512";
  const int32_t shapes[][5] = {{64, 16, 32, 128, 128}, {229, 2, 4, 128, 128}, {150, 1, 2, 32, 16}, {17, 1, 1, 16, 48}};
  for (const F32Kernel& k : f32_kernels()) {
    for (const auto& sh : shapes) {
      const Data d = make(sh[0], sh[1], sh[2], sh[3], sh[4], 21);
      const std::string what = std::string(k.name) + " n=" + std::to_string(d.n) + " n_v=" + std::to_string(d.n_v) +
                               " d_k=" + std::to_string(d.d_k) + " d_v=" + std::to_string(d.d_v);
      std::vector<float> s_ref = d.state, s_chk = d.state, o_ref(d.v.size()), o_chk(d.v.size());
      const GdnSequence r = seq(d, 0, d.n, s_ref, o_ref), c = seq(d, 0, d.n, s_chk, o_chk);
      for (int32_t h = 0; h < d.n_v; ++h) {
        gdn_head_scalar(r, h);
        k.run(c, h);
      }
      expect_close(o_chk, o_ref, what + " out");
      expect_close(s_chk, s_ref, what + " state");
    }
  }
}

// Stated tolerances of the bf16 kernel, |Δ| ≤ tol · max|ref| for every output and the final state
// (measured on AMD EPYC Zen 5: parts 3 ≤ 1.2e-5, parts 1 ≤ 5.3e-3 of max|ref|; bf16's own
// rounding step is 2^-8 = 3.9e-3).
constexpr double kBf16x3Tolerance = 3e-5, kBf16Tolerance = 1e-2;

bool has_avx512_bf16() { return cpu_isa() == Isa::Avx512 && cpu_features().avx512_bf16; }

// The bf16 dot-product kernel (parts 3: hi + lo operands; parts 1: bf16 operands) against the
// scalar recurrence on the same shapes.
TEST(GatedDeltaRuleChunkedBf16, MatchesTheRecurrence) {
  if (!has_avx512_bf16()) GTEST_SKIP() << "the bf16 chunked kernel needs AVX512_BF16";
  const int32_t shapes[][5] = {{64, 16, 32, 128, 128}, {229, 2, 4, 128, 128}, {150, 1, 2, 32, 16}, {17, 1, 1, 16, 48}};
  for (const int32_t parts : {3, 1}) {
    for (const auto& sh : shapes) {
      const Data d = make(sh[0], sh[1], sh[2], sh[3], sh[4], 21);
      const std::string what = "bf16 parts=" + std::to_string(parts) + " n=" + std::to_string(d.n) +
                               " n_v=" + std::to_string(d.n_v) + " d_k=" + std::to_string(d.d_k) +
                               " d_v=" + std::to_string(d.d_v);
      std::vector<float> s_ref = d.state, s_chk = d.state, o_ref(d.v.size()), o_chk(d.v.size());
      const GdnSequence r = seq(d, 0, d.n, s_ref, o_ref), c = seq(d, 0, d.n, s_chk, o_chk);
      for (int32_t h = 0; h < d.n_v; ++h) {
        gdn_head_scalar(r, h);
        cpu::gdn_head_chunked_bf16_avx512(c, h, parts);
      }
      const double rel = parts == 3 ? kBf16x3Tolerance : kBf16Tolerance;
      expect_close(o_chk, o_ref, what + " out", rel, 0);
      expect_close(s_chk, s_ref, what + " state", rel, 0);
    }
  }
}

void expect_split_and_head_invariant(HeadKernel kernel) {
  const Data d = make(200, 2, 4, 128, 128, 31);
  std::vector<float> s_one = d.state, o_one(d.v.size());
  const GdnSequence one = seq(d, 0, d.n, s_one, o_one);
  for (int32_t h = 0; h < d.n_v; ++h) kernel(one, h);
  // Two calls split at row 128 (a multiple of C), heads in reverse order.
  std::vector<float> s_two = d.state, o_two(d.v.size());
  for (auto [t0, t1] : {std::pair<int64_t, int64_t>{0, 128}, {128, d.n}}) {
    const GdnSequence part = seq(d, t0, t1, s_two, o_two);
    for (int32_t h = d.n_v - 1; h >= 0; --h) kernel(part, h);
  }
  EXPECT_TRUE(bitwise_equal(o_two.data(), o_one.data(), int64_t(o_one.size())));
  EXPECT_TRUE(bitwise_equal(s_two.data(), s_one.data(), int64_t(s_one.size())));
  // Head 1 alone, with the other heads' state garbage: its rows and state are the same bits.
  std::vector<float> s_alone(d.state.size(), 7.0f), o_alone(d.v.size(), 0.0f);
  const size_t hs = size_t(d.d_k) * d.d_v;
  std::copy(d.state.begin() + hs, d.state.begin() + 2 * hs, s_alone.begin() + hs);
  kernel(seq(d, 0, d.n, s_alone, o_alone), 1);
  for (int64_t t = 0; t < d.n; ++t)
    ASSERT_TRUE(bitwise_equal(o_alone.data() + (t * d.n_v + 1) * d.d_v, o_one.data() + (t * d.n_v + 1) * d.d_v, d.d_v))
        << "row " << t;
  EXPECT_TRUE(bitwise_equal(s_alone.data() + hs, s_one.data() + hs, int64_t(hs)));
}

TEST(GatedDeltaRuleChunked, SplitsAtChunkBoundariesAndOtherHeadsChangeNothing) {
  if (f32_kernels().empty()) GTEST_SKIP() << "the chunked kernels need AVX2 or AVX-512";
  for (const F32Kernel& k : f32_kernels()) {
    SCOPED_TRACE(k.name);
    expect_split_and_head_invariant(k.run);
  }
}

TEST(GatedDeltaRuleChunkedBf16, SplitsAtChunkBoundariesAndOtherHeadsChangeNothing) {
  if (!has_avx512_bf16()) GTEST_SKIP() << "the bf16 chunked kernel needs AVX512_BF16";
  expect_split_and_head_invariant([](const GdnSequence& s, int32_t h) { cpu::gdn_head_chunked_bf16_avx512(s, h, 3); });
  expect_split_and_head_invariant([](const GdnSequence& s, int32_t h) { cpu::gdn_head_chunked_bf16_avx512(s, h, 1); });
}

// Backend::gated_delta_rule_chunked runs the bf16 kernel (bf16 operands) at --matmul-precision
// medium where the CPU has AVX512_BF16, and the f32 kernel of the backend's ISA (AVX-512 or AVX2)
// at high and highest (and at medium without AVX512_BF16): each the bits of that kernel run head
// by head. On AVX2 the backend also says it has the chunked form for the model head dims.
TEST(GatedDeltaRuleChunkedBf16, TheBackendPicksTheKernelByMatmulPrecision) {
  if (cpu_isa() != Isa::Avx512 && cpu_isa() != Isa::Avx2) GTEST_SKIP() << "the chunked kernels need AVX2 or AVX-512";
  const Data d = make(150, 2, 4, 128, 128, 41);
  for (const MatmulPrecision p : {MatmulPrecision::Highest, MatmulPrecision::High, MatmulPrecision::Medium}) {
    const bool bf16 = p == MatmulPrecision::Medium && has_avx512_bf16();
    std::vector<float> s_be = d.state, o_be(d.v.size()), s_want = d.state, o_want(d.v.size());
    auto be = make_cpu_backend(2, {}, p);
    ASSERT_TRUE(be->gdn_chunked_supported(128, 128)) << be->name();
    be->gated_delta_rule_chunked(seq(d, 0, d.n, s_be, o_be));
    const GdnSequence w = seq(d, 0, d.n, s_want, o_want);
    for (int32_t h = 0; h < d.n_v; ++h) {
      if (bf16)
        cpu::gdn_head_chunked_bf16_avx512(w, h, 1);
      else if (cpu_isa() == Isa::Avx512)
        cpu::gdn_head_chunked_avx512(w, h);
      else
        cpu::gdn_head_chunked_avx2(w, h);
    }
    EXPECT_TRUE(bitwise_equal(o_be.data(), o_want.data(), int64_t(o_want.size()))) << matmul_precision_name(p);
    EXPECT_TRUE(bitwise_equal(s_be.data(), s_want.data(), int64_t(s_want.size()))) << matmul_precision_name(p);
  }
}

}  // namespace
}  // namespace pypto::test
