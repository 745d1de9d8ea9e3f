// panel_ab.sh's driver: times side A and side B of the column-panel linears in alternating 50 ms
// slices within one process, 30 rounds (A first in even rounds, B first in odd ones), so that the
// host's slow moments (a shared machine whose speed moves 2x within seconds) fall on both sides
// alike; prints each side's median GMAC/s and the median and quartiles of the per-round ratios
// B / A.
//   panel_ab N K M [bf16|f16]   (W: N × K, x: M × K; 4 copies of W, rotated)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/bf16_panels.h"
#include "kernels/cpu/f16_panels.h"
#include "kernels/cpu/kernel_table.h"

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
  auto gmacs = [&](void (*f)(const LinearTask&, bool)) {
    const auto t0 = std::chrono::steady_clock::now();
    int64_t calls = 0;
    double s = 0;
    do {
      LinearTask t;
      t.x = x.data();
      t.w = ws[calls % kCopies].data();
      t.y = y.data();
      t.m = m;
      t.k = k;
      t.n_out = n;
      f(t, f16);
      ++calls;
      s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    } while (s < 0.05);
    return double(calls) * n * k * m / s / 1e9;
  };
  std::vector<double> a, b, ratio;
  for (int r = 0; r < 30; ++r) {
    // Which side goes first alternates: the second of two slices measured up to 1.1x faster with
    // the same code on both sides.
    if (r % 2 == 0) {
      a.push_back(gmacs(panel_linear_side_a));
      b.push_back(gmacs(panel_linear_side_b));
    } else {
      b.push_back(gmacs(panel_linear_side_b));
      a.push_back(gmacs(panel_linear_side_a));
    }
    ratio.push_back(b.back() / a.back());
  }
  auto q = [](std::vector<double> v, double f) {
    std::sort(v.begin(), v.end());
    return v[size_t(f * double(v.size() - 1) + 0.5)];
  };
  std::printf("%s n=%ld k=%ld m=%ld: A %.1f, B %.1f GMAC/s; B/A median %.3f (quartiles %.3f, %.3f)\n",
              f16 ? "f16" : "bf16", long(n), long(k), long(m), q(a, 0.5), q(b, 0.5), q(ratio, 0.5), q(ratio, 0.25),
              q(ratio, 0.75));
}
