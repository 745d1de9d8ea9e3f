#include "cli/npy_writer.h"

#include <fstream>

#include "core/error.h"

namespace pypto::cli {

// numpy .npy version 1.0: magic, header length (u16 LE), a Python dict literal padded with
// spaces to a 64-byte boundary and ended by '\n', then the raw little-endian f32 data.
void write_npy_f32(const std::string& path, const float* data, int64_t rows, int64_t cols) {
  std::string dict = str_cat("{'descr': '<f4', 'fortran_order': False, 'shape': (", rows, ", ", cols, "), }");
  const size_t prefix = 10;  // magic(6) + version(2) + header length(2)
  size_t total = prefix + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("--out: cannot create '", path, "'");
  const uint16_t hlen = static_cast<uint16_t>(dict.size());
  const char magic[8] = {'\x93', 'N', 'U', 'M', 'P', 'Y', 1, 0};
  f.write(magic, 8);
  const char len_le[2] = {char(hlen & 0xff), char(hlen >> 8)};
  f.write(len_le, 2);
  f.write(dict.data(), std::streamsize(dict.size()));
  f.write(reinterpret_cast<const char*>(data), std::streamsize(sizeof(float) * rows * cols));
  if (!f) fail("--out: writing '", path, "' failed");
}

}  // namespace pypto::cli
