// quant_avx2_ab.sh's driver: the AVX2 quantized-weight linears of two revisions, linked into one
// binary (each side's symbols renamed by the script), run on the same operands in alternating 50 ms
// slices: int16 activations (kernels/cpu/linear_quant_i16_avx2.cpp, --matmul-precision high) or
// int8 activations (kernels/cpu/linear_quant_avx2.cpp, medium), int8 or int4 weights.
//   quant_avx2_ab N K M [int8|int4] [int16|int8]   (y[M, N] = x[M, K] · W[N, K]ᵀ; int4: groups of 64)
// The operands are random bytes in the kernels' layouts (int8 quad panels of 16 columns, int4
// super-panels of 64 columns, int16 activations per 64-input block or int8 per row): the speed of
// the arithmetic does not depend on the values. Columns are split between OpenMP threads in whole
// panels (super-panels for int4), as the backend's column chunks are. Prints both rates (GMAC/s,
// medians) and the median of the per-round ratios B / A with its quartiles (ab_rounds.h).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/kernel_table.h"
#include "kernels/cpu/quant_panels.h"
#include "../ab_rounds.h"

namespace pypto::cpu {
void fill_quant_i16_side_a(KernelTable&);  // linear_quant_i16_avx2.cpp of each side
void fill_quant_i16_side_b(KernelTable&);
void fill_quant_i8_side_a(KernelTable&);  // linear_quant_avx2.cpp of each side
void fill_quant_i8_side_b(KernelTable&);
}  // namespace pypto::cpu

using pypto::cpu::KernelTable;
using pypto::cpu::QuantLinearTask;

namespace {

void run(const KernelTable& kt, const QuantLinearTask& t, bool int4, bool int16) {
  const int64_t width = int4 ? 64 : 16;  // columns of a (super-)panel
#pragma omp parallel
  {
    const int th = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t panels = (t.n_out + width - 1) / width, p0 = panels * th / nt, p1 = panels * (th + 1) / nt;
    const auto cols = int16 ? (int4 ? kt.linear_cols_q4_i16 : kt.linear_cols_q8_i16)
                            : (int4 ? kt.linear_cols_q4 : kt.linear_cols_q8);
    cols(t, p0 * width, std::min(p1 * width, t.n_out));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 6) {
    std::fprintf(stderr, "usage: quant_avx2_ab N K M [int8|int4] [int16|int8]\n");
    return 2;
  }
  const int64_t n = std::atol(argv[1]), k = std::atol(argv[2]), m = std::atol(argv[3]);
  const std::string format = argc >= 5 ? argv[4] : "int8", act = argc >= 6 ? argv[5] : "int16";
  if (n <= 0 || k <= 0 || m <= 0 || (format != "int8" && format != "int4") || (format == "int4" && k % 64) ||
      (act != "int16" && act != "int8")) {
    std::fprintf(stderr,
                 "quant_avx2_ab: N, K and M must be positive, the weights int8 or int4 (K a multiple of 64), the "
                 "activations int16 or int8\n");
    return 2;
  }
  const bool int4 = format == "int4", int16 = act == "int16";
  KernelTable a, b;
  pypto::cpu::fill_quant_i16_side_a(a);
  pypto::cpu::fill_quant_i16_side_b(b);
  pypto::cpu::fill_quant_i8_side_a(a);
  pypto::cpu::fill_quant_i8_side_b(b);
  // Layouts (kernel_table.h QuantLinearTask, quant_panels.h): int8 16-column panels of 1,024 bytes
  // per 64 inputs; int4 64-column super-panels of one record per group of 64 inputs; activation
  // rows of ldw int16 (k rounded up to the 64-input block), one scale (and for int4 one Σ xq) per
  // block.
  const int64_t panels = (n + 15) / 16, pstride = (k + 63) / 64 * 1024, ldw = (k + 63) / 64 * 64,
                blocks = (k + 63) / 64;
  const int64_t weight_bytes =
      int4 ? (n + 63) / 64 * blocks * pypto::cpu::q4_record_bytes(64) : panels * pstride;
  std::mt19937 rng(1);
  std::vector<uint8_t> w(static_cast<size_t>(weight_bytes));
  for (auto& v : w) v = uint8_t(rng());
  std::vector<int16_t> xw(size_t(m * ldw));
  for (auto& v : xw) v = int16_t(rng() % 65535 - 32767);
  std::vector<float> xscale(size_t(m * blocks), 1e-4f), scale(size_t(panels * 16), 1e-3f), y(size_t(m * n));
  std::vector<int32_t> xsum(size_t(m * blocks), 0);
  std::vector<uint8_t> xq(size_t(m * ldw));
  for (auto& v : xq) v = uint8_t(rng() % 255);
  QuantLinearTask t;
  t.m = m;
  t.k = k;
  t.n_out = n;
  t.w = w.data();
  t.scale = scale.data();
  t.xw = xw.data();
  t.ldw = ldw;
  t.xblock = 64;
  t.xq = xq.data();
  t.ldq = ldw;
  if (int4) {
    t.group = 64;
    t.groups = blocks;
    t.xsum = xsum.data();
  }
  t.xscale = xscale.data();
  t.y = y.data();
  const AbRates r = ab_rounds([&](int side, int64_t) { run(side ? b : a, t, int4, int16); },
                              double(m) * double(n) * double(k));
  std::printf("%s weights, %s activations n=%ld k=%ld m=%ld: A %.1f, B %.1f GMAC/s; B/A median %.3f (quartiles "
              "%.3f, %.3f)\n",
              format.c_str(), act.c_str(), long(n), long(k), long(m), r.a, r.b, r.ratio, r.ratio_q1, r.ratio_q3);
}
