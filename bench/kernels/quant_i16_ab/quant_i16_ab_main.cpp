// quant_i16_ab.sh's driver: the int8-weight, int16-activation linear of AVX2
// (kernels/cpu/linear_quant_i16_avx2.cpp) of two revisions, linked into one binary (side A's
// symbols renamed by the script), run on the same operands in alternating 50 ms slices.
//   quant_i16_ab N K M   (y[M, N] = x[M, K] · W[N, K]ᵀ)
// The operands are random bytes in the kernel's layouts (int8 quad panels of 16 columns, int16
// activations per 64-input block): the speed of the arithmetic does not depend on the values.
// Columns are split between OpenMP threads in whole panels, as the backend's column chunks are.
// Prints both rates (GMAC/s, medians) and the median of the per-round ratios B / A with its
// quartiles.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "kernels/cpu/kernel_table.h"

namespace pypto::cpu {
void fill_quant_i16_side_a(KernelTable&);
void fill_quant_i16_side_b(KernelTable&);
}  // namespace pypto::cpu

using pypto::cpu::KernelTable;
using pypto::cpu::QuantLinearTask;

namespace {

void run(const KernelTable& kt, const QuantLinearTask& t) {
#pragma omp parallel
  {
    const int th = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t panels = (t.n_out + 15) / 16, p0 = panels * th / nt, p1 = panels * (th + 1) / nt;
    kt.linear_cols_q8_i16(t, p0 * 16, std::min(p1 * 16, t.n_out));
  }
}

// The q-th quantile of v (nearest rank below).
double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[size_t(q * double(v.size() - 1))];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: quant_i16_ab N K M\n");
    return 2;
  }
  const int64_t n = std::atol(argv[1]), k = std::atol(argv[2]), m = std::atol(argv[3]);
  if (n <= 0 || k <= 0 || m <= 0) {
    std::fprintf(stderr, "quant_i16_ab: N, K and M must be positive\n");
    return 2;
  }
  KernelTable a, b;
  pypto::cpu::fill_quant_i16_side_a(a);
  pypto::cpu::fill_quant_i16_side_b(b);
  // Layouts (kernel_table.h QuantLinearTask): 16-column panels of 1,024 bytes per 64 inputs;
  // activation rows of ldw int16 (k rounded up to the 64-input block), one scale per block.
  const int64_t panels = (n + 15) / 16, pstride = (k + 63) / 64 * 1024, ldw = (k + 63) / 64 * 64,
                blocks = (k + 63) / 64;
  std::mt19937 rng(1);
  std::vector<uint8_t> w(size_t(panels * pstride));
  for (auto& v : w) v = uint8_t(rng());
  std::vector<int16_t> xw(size_t(m * ldw));
  for (auto& v : xw) v = int16_t(rng() % 65535 - 32767);
  std::vector<float> xscale(size_t(m * blocks), 1e-4f), scale(size_t(panels * 16), 1e-3f), y(size_t(m * n));
  QuantLinearTask t;
  t.m = m;
  t.k = k;
  t.n_out = n;
  t.w = w.data();
  t.scale = scale.data();
  t.xw = xw.data();
  t.ldw = ldw;
  t.xblock = 64;
  t.xscale = xscale.data();
  t.y = y.data();
  std::vector<double> rate_a, rate_b, ratio;
  for (int round = 0; round < 30; ++round) {
    double rate[2];
    for (int s = 0; s < 2; ++s) {
      const int side = (round + s) % 2;  // which side goes first alternates too
      const KernelTable& kt = side ? b : a;
      const auto t0 = std::chrono::steady_clock::now();
      int64_t calls = 0;
      double elapsed = 0;
      do {
        run(kt, t);
        ++calls;
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      } while (elapsed < 0.05);
      rate[side] = double(calls) * double(m * n * k) / elapsed * 1e-9;
    }
    rate_a.push_back(rate[0]);
    rate_b.push_back(rate[1]);
    ratio.push_back(rate[1] / rate[0]);
  }
  std::printf("int8 weights, int16 activations n=%ld k=%ld m=%ld: A %.1f, B %.1f GMAC/s; B/A median %.3f (quartiles "
              "%.3f, %.3f)\n",
              long(n), long(k), long(m), quantile(rate_a, 0.5), quantile(rate_b, 0.5), quantile(ratio, 0.5),
              quantile(ratio, 0.25), quantile(ratio, 0.75));
}
