#pragma once
// A one-line progress display for long work (loading, staging, benchmarks): redrawn in place on
// a terminal, silent when stderr is not a TTY (logs stay clean in CI and pipes).
#include <chrono>
#include <cstddef>
#include <string>

namespace pypto {

class Progress {
 public:
  // `total` units of work; `bytes_total` (optional) enables a GB and GB/s readout.
  Progress(std::string label, size_t total, size_t bytes_total = 0);
  ~Progress();
  void advance(size_t units, size_t bytes = 0);
  void finish();  // final line (newline) when on a terminal
  double elapsed_s() const;
  static bool enabled();  // stderr is a terminal and PYPTO_NO_PROGRESS is unset

 private:
  void draw(bool final_line);
  std::string label_;
  size_t total_, bytes_total_, done_ = 0, bytes_done_ = 0;
  bool on_tty_, finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace pypto
