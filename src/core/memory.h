#pragma once
// Aligned, owned buffers (weights slabs, KV pools, arenas) and process memory readings.
#include <cstddef>
#include <cstdint>

namespace pypto {

// A zero-initialised, 64-byte-aligned (huge-page advised when large) anonymous mapping.
// Move-only; frees on destruction.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t nbytes);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer&& o) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// Resident set size of this process now and its high-water mark (VmHWM), in bytes.
size_t rss_bytes();
size_t peak_rss_bytes();
// Memory the kernel reports as available to new allocations (MemAvailable), in bytes.
size_t available_memory_bytes();
// Parses "4GiB", "512MiB", "1.5GB", "1000000" into bytes; throws Error naming `what` otherwise.
size_t parse_byte_size(const char* what, const char* text);
// "1.23 GiB" style for logs.
const char* format_bytes(size_t bytes, char* buf, size_t buflen);

}  // namespace pypto
