#include "core/progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace pypto {

bool Progress::enabled() { return isatty(STDERR_FILENO) && !std::getenv("PYPTO_NO_PROGRESS"); }

Progress::Progress(std::string label, size_t total, size_t bytes_total)
    : label_(std::move(label)), total_(total), bytes_total_(bytes_total), on_tty_(enabled()),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

Progress::~Progress() { finish(); }

double Progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void Progress::advance(size_t units, size_t bytes) {
  done_ += units;
  bytes_done_ += bytes;
  auto now = std::chrono::steady_clock::now();
  if (on_tty_ && (now - last_draw_ > std::chrono::milliseconds(100) || done_ >= total_)) {
    last_draw_ = now;
    draw(false);
  }
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (on_tty_) draw(true);
}

void Progress::draw(bool final_line) {
  double t = elapsed_s();
  double gb = bytes_done_ / 1e9;
  int width = 30;
  int filled = total_ ? static_cast<int>(width * static_cast<double>(done_) / total_) : width;
  std::string bar(filled, '#');
  bar.resize(width, '.');
  if (bytes_total_)
    std::fprintf(stderr, "\r%s [%s] %zu/%zu  %.2f/%.2f GB  %.2f GB/s  %.1fs%s", label_.c_str(), bar.c_str(), done_,
                 total_, gb, bytes_total_ / 1e9, t > 0 ? gb / t : 0.0, t, final_line ? "\n" : "");
  else
    std::fprintf(stderr, "\r%s [%s] %zu/%zu  %.1fs%s", label_.c_str(), bar.c_str(), done_, total_, t,
                 final_line ? "\n" : "");
  std::fflush(stderr);
}

}  // namespace pypto
