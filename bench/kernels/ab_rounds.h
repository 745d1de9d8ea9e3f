#pragma once
// The alternation that panel_ab.sh and quant_avx2_ab.sh time two revisions with, in one process:
// 30 rounds, each timing side A and side B for 50 ms slices (which side goes first alternates:
// the second of two slices measured up to 1.1x faster with the same code on both sides), so the
// host's slow moments (a shared machine whose speed moves 2x within seconds) fall on both alike.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

struct AbRates {
  double a = 0, b = 0;                           // each side's median rate (GMAC/s)
  double ratio = 0, ratio_q1 = 0, ratio_q3 = 0;  // median and quartiles of the per-round B / A
};

// The f-th quantile of v (nearest rank).
inline double ab_quantile(std::vector<double> v, double f) {
  std::sort(v.begin(), v.end());
  return v[size_t(f * double(v.size() - 1) + 0.5)];
}

// call(side, i): side 0 (A) or 1 (B) runs its i-th call of the slice; macs: multiply-adds per call.
template <class Call>
AbRates ab_rounds(Call call, double macs) {
  std::vector<double> rate[2], ratio;
  for (int round = 0; round < 30; ++round) {
    double r[2];
    for (int s = 0; s < 2; ++s) {
      const int side = (round + s) % 2;
      const auto t0 = std::chrono::steady_clock::now();
      int64_t calls = 0;
      double elapsed = 0;
      do {
        call(side, calls);
        ++calls;
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      } while (elapsed < 0.05);
      r[side] = double(calls) * macs / elapsed * 1e-9;
    }
    rate[0].push_back(r[0]);
    rate[1].push_back(r[1]);
    ratio.push_back(r[1] / r[0]);
  }
  return {ab_quantile(rate[0], 0.5), ab_quantile(rate[1], 0.5), ab_quantile(ratio, 0.5), ab_quantile(ratio, 0.25),
          ab_quantile(ratio, 0.75)};
}
