// panel_ab.sh's driver: times side A and side B of the column-panel linears in alternating 50 ms
// slices within one process (ab_rounds.h); prints each side's median GMAC/s and the median and
// quartiles of the per-round ratios B / A.
//   panel_ab N K M [bf16|f16]   (W: N × K, x: M × K; 4 copies of W, rotated)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16_panels.h"
#include "kernels/cpu/f16_panels.h"
#include "kernels/cpu/kernel_table.h"
#include "../ab_rounds.h"

using pypto::cpu::LinearTask;
void panel_linear_side_a(const LinearTask& t, bool f16);
void panel_linear_side_b(const LinearTask& t, bool f16);

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: panel_ab N K M [bf16|f16]\n");
    return 2;
  }
  const int64_t n = std::atol(argv[1]), k = std::atol(argv[2]), m = std::atol(argv[3]);
  const bool f16 = argc > 4 && std::strcmp(argv[4], "f16") == 0;
  const int64_t pstride = f16 ? pypto::cpu::f16_panel_elems(k) : pypto::cpu::bf16_panel_elems(k);
  constexpr int kCopies = 4;  // W rotated so a large one comes from memory, as in a model
  // Any finite weights do: the timing does not depend on the values (0x3c00: f16 1.0, bf16 ~1.0).
  std::vector<std::vector<uint16_t>> ws(kCopies, std::vector<uint16_t>(pstride * ((n + 15) / 16) + 64, 0x3c00));
  std::vector<float> x(m * k, 1.0f), y(m * n);
  const AbRates r = ab_rounds(
      [&](int side, int64_t i) {
        LinearTask t;
        t.x = x.data();
        t.w = ws[i % kCopies].data();
        t.y = y.data();
        t.m = m;
        t.k = k;
        t.n_out = n;
        (side ? panel_linear_side_b : panel_linear_side_a)(t, f16);
      },
      double(n) * double(k) * double(m));
  std::printf("%s n=%ld k=%ld m=%ld: A %.1f, B %.1f GMAC/s; B/A median %.3f (quartiles %.3f, %.3f)\n",
              f16 ? "f16" : "bf16", long(n), long(k), long(m), r.a, r.b, r.ratio, r.ratio_q1, r.ratio_q3);
}
