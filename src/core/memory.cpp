#include "core/memory.h"

#include <sys/mman.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.h"

namespace pypto {

AlignedBuffer::AlignedBuffer(size_t nbytes) : size_(nbytes) {
  if (nbytes == 0) return;
  void* p = mmap(nullptr, nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) fail("out of memory: cannot allocate ", nbytes, " bytes: ", std::strerror(errno));
  if (nbytes >= (2u << 20)) madvise(p, nbytes, MADV_HUGEPAGE);
  data_ = static_cast<uint8_t*>(p);
}

AlignedBuffer::~AlignedBuffer() {
  if (data_) munmap(data_, size_);
}

AlignedBuffer::AlignedBuffer(AlignedBuffer&& o) noexcept
    : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& o) noexcept {
  if (this != &o) {
    if (data_) munmap(data_, size_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

static size_t read_status_kb(const char* file, const char* key) {
  FILE* f = std::fopen(file, "r");
  if (!f) return 0;
  char line[256];
  size_t klen = std::strlen(key), kb = 0;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, key, klen) == 0) {
      kb = std::strtoull(line + klen, nullptr, 10);
      break;
    }
  }
  std::fclose(f);
  return kb;
}

size_t rss_bytes() { return read_status_kb("/proc/self/status", "VmRSS:") * 1024; }
size_t peak_rss_bytes() { return read_status_kb("/proc/self/status", "VmHWM:") * 1024; }
size_t available_memory_bytes() { return read_status_kb("/proc/meminfo", "MemAvailable:") * 1024; }

size_t parse_byte_size(const char* what, const char* text) {
  std::string s(text ? text : "");
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || !(v >= 0) || !std::isfinite(v))
    fail(what, ": '", s, "' is not a size (examples: 4GiB, 512MiB, 2GB, 1048576)");
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  double mul;
  if (unit.empty() || unit == "B") mul = 1;
  else if (unit == "KiB" || unit == "K" || unit == "k") mul = 1024.0;
  else if (unit == "MiB" || unit == "M") mul = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G") mul = 1024.0 * 1024 * 1024;
  else if (unit == "TiB" || unit == "T") mul = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB" || unit == "kB") mul = 1e3;
  else if (unit == "MB") mul = 1e6;
  else if (unit == "GB") mul = 1e9;
  else if (unit == "TB") mul = 1e12;
  else fail(what, ": unknown unit '", unit, "' in '", s, "' (allowed: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)");
  return static_cast<size_t>(v * mul);
}

const char* format_bytes(size_t bytes, char* buf, size_t buflen) {
  double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) std::snprintf(buf, buflen, "%.2f GiB", b / (1024.0 * 1024 * 1024));
  else if (b >= 1024.0 * 1024) std::snprintf(buf, buflen, "%.1f MiB", b / (1024.0 * 1024));
  else if (b >= 1024.0) std::snprintf(buf, buflen, "%.1f KiB", b / 1024.0);
  else std::snprintf(buf, buflen, "%zu B", bytes);
  return buf;
}

}  // namespace pypto
