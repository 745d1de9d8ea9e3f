#pragma once
// Reading .safetensors files through mmap. Format: 8-byte little-endian header length N, then N
// bytes of JSON {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data area; offsets are relative to the start of the data area.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.h"

namespace pypto {

struct SafetensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  size_t begin = 0;  // offset in the data area
  size_t end = 0;
};

// Validates a whole file image (header and offsets) without touching tensor data: the header
// length lies within the file, the header is a JSON object, every tensor has a supported dtype
// (BF16, F16, F32; F8_E4M3 and I32 for pre-quantized checkpoints), a shape of non-negative integers, offsets inside the data area whose length
// equals dtype size × elements, and no two tensors overlap. Throws Error naming `path` and the
// tensor. On success returns the tensors (sorted by name) and sets *data_start.
std::vector<SafetensorInfo> parse_safetensors_header(const uint8_t* file, size_t file_size, const std::string& path,
                                                     size_t* data_start);

class SafetensorsFile {
 public:
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  const std::vector<SafetensorInfo>& tensors() const { return tensors_; }
  const SafetensorInfo* find(const std::string& name) const;
  const uint8_t* data(const SafetensorInfo& t) const { return base_ + data_start_ + t.begin; }
  // Drops this tensor's pages from the process's resident set (they stay in the page cache), so
  // staging layer by layer never holds the mapped checkpoint and the staged copy at once.
  void release(const SafetensorInfo& t) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  size_t data_start_ = 0;
  std::vector<SafetensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

// Writes tensors to a .safetensors file (used by make-test-model), one at a time so memory stays
// at one tensor: `fill` writes exactly dtype size × numel bytes into the buffer it is given.
// Tensors are laid out in the given order, 64-byte aligned; the file appears atomically.
struct SafetensorWrite {
  std::string name;
  DType dtype;
  Shape shape;
  std::function<void(uint8_t* dst)> fill;
};
void write_safetensors(const std::string& path, const std::vector<SafetensorWrite>& tensors);

}  // namespace pypto
