#pragma once
// The output columns of several independent linears (a grouped op, Backend::linear_grouped) as
// one index space, handed out in one parallel job. Call i's columns [0, n_i) sit at
// [start_i, start_i + n_i) with start_i a multiple of `unit`, so every guided chunk boundary
// (a multiple of `unit`) falls on a multiple of `unit` inside each call: the kernels see the
// same tile boundaries as when each call runs alone, and every column is computed on its own,
// so the split never changes a value.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/thread_pool.h"

namespace pypto::cpu {

class GroupedColumns {
 public:
  // n_out[i]: call i's output columns; unit: the kernels' column unit (the guided chunk unit).
  GroupedColumns(const std::vector<int64_t>& n_out, int64_t unit) : unit_(unit) {
    start_.reserve(n_out.size() + 1);
    int64_t s = 0;
    for (int64_t n : n_out) {
      start_.push_back(s);
      n_.push_back(n);
      s += (n + unit - 1) / unit * unit;
    }
    start_.push_back(s);
  }
  int64_t total() const { return start_.back(); }

  // fn(call, col_begin, col_end, thread) over every call's columns, on the pool in guided chunks.
  template <typename F>
  void run(ThreadPool& pool, F&& fn) const {
    pool.parallel_for_guided(total(), unit_, [&](int64_t b, int64_t e, int tid) { each(b, e, tid, fn); });
  }
  // The same on the calling thread alone (work too small to wake the pool).
  template <typename F>
  void run_serial(F&& fn) const {
    each(0, total(), 0, fn);
  }

 private:
  // The calls' column ranges inside global columns [b, e): the padding between calls is skipped.
  template <typename F>
  void each(int64_t b, int64_t e, int tid, F& fn) const {
    // First call whose padded range ends after b.
    size_t i = size_t(std::upper_bound(start_.begin(), start_.end(), b) - start_.begin()) - 1;
    for (; i < n_.size() && start_[i] < e; ++i) {
      const int64_t c0 = std::max(b, start_[i]) - start_[i];
      const int64_t c1 = std::min(e - start_[i], n_[i]);
      if (c0 < c1) fn(i, c0, c1, tid);
    }
  }
  int64_t unit_;
  std::vector<int64_t> start_, n_;
};

}  // namespace pypto::cpu
