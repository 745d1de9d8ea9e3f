#pragma once
// Small helpers shared by the whole-model benchmarks (bench_model, bench_moe).
#include <algorithm>
#include <cstdlib>
#include <vector>

namespace pypto::bench {

// "1,4,16" → {1, 4, 16}.
inline std::vector<int> parse_int_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') p++;
    if (*p == ',') p++;
  }
  return v;
}

// The middle value (the upper one of an even count).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace pypto::bench
