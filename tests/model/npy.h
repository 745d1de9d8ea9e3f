#pragma once
// Reads a 2-D float32 numpy .npy file (version 1.x/2.x, little-endian, C order): what
// tests/reference/qwen3_reference.py writes with np.save.
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace pypto::test {

struct NpyF32 {
  int64_t rows = 0, cols = 0;
  std::vector<float> data;  // [rows, cols]
  const float* row(int64_t r) const { return data.data() + r * cols; }
};

inline NpyF32 read_npy_f32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open ", path);
  char magic[8];
  f.read(magic, 8);
  if (!f || std::string(magic + 1, 5) != "NUMPY") fail(path, ": not a .npy file");
  uint32_t hlen = 0;
  if (magic[6] == 1) {
    unsigned char b[2];
    f.read(reinterpret_cast<char*>(b), 2);
    hlen = b[0] | (b[1] << 8);
  } else {
    unsigned char b[4];
    f.read(reinterpret_cast<char*>(b), 4);
    hlen = b[0] | (b[1] << 8) | (b[2] << 16) | (uint32_t(b[3]) << 24);
  }
  std::string header(hlen, '\0');
  f.read(header.data(), hlen);
  if (header.find("'<f4'") == std::string::npos) fail(path, ": expected dtype <f4, header ", header);
  if (header.find("'fortran_order': False") == std::string::npos) fail(path, ": expected C order");
  const size_t lp = header.find('(', header.find("'shape'"));
  const size_t rp = header.find(')', lp);
  const std::string shape = header.substr(lp + 1, rp - lp - 1);
  NpyF32 out;
  const size_t comma = shape.find(',');
  out.rows = std::stoll(shape.substr(0, comma));
  out.cols = comma == std::string::npos || shape.find_first_of("0123456789", comma) == std::string::npos
                 ? 1
                 : std::stoll(shape.substr(comma + 1));
  out.data.resize(size_t(out.rows * out.cols));
  f.read(reinterpret_cast<char*>(out.data.data()), std::streamsize(out.data.size() * sizeof(float)));
  if (!f) fail(path, ": truncated data");
  return out;
}

}  // namespace pypto::test
