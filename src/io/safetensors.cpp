#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/memory.h"

namespace pypto {

std::vector<SafetensorInfo> parse_safetensors_header(const uint8_t* file, size_t file_size, const std::string& path,
                                                     size_t* data_start) {
  if (file_size < 8) fail(path, ": not a safetensors file: ", file_size, " bytes, shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; i--) n = (n << 8) | file[i];
  if (n > file_size - 8)
    fail(path, ": safetensors header length ", n, " runs past the end of the file (", file_size, " bytes)");
  if (n < 2) fail(path, ": safetensors header length ", n, " is too short for a JSON object");
  nlohmann::json h = nlohmann::json::parse(file + 8, file + 8 + n, nullptr, /*allow_exceptions=*/false);
  if (h.is_discarded()) fail(path, ": safetensors header is not valid JSON");
  if (!h.is_object()) fail(path, ": safetensors header must be a JSON object");
  const size_t data_size = file_size - 8 - n;

  std::vector<SafetensorInfo> out;
  for (auto it = h.begin(); it != h.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") {
      if (!it->is_object()) fail(path, ": __metadata__ must be an object of strings");
      for (auto m = it->begin(); m != it->end(); ++m)
        if (!m->is_string()) fail(path, ": __metadata__ entry '", m.key(), "' must be a string");
      continue;
    }
    const auto& e = *it;
    if (!e.is_object()) fail(path, ": tensor '", name, "': entry must be an object");
    SafetensorInfo t;
    t.name = name;
    if (!e.contains("dtype") || !e["dtype"].is_string()) fail(path, ": tensor '", name, "': missing string 'dtype'");
    std::string dt = e["dtype"].get<std::string>();
    if (dt == "BF16") t.dtype = DType::BF16;
    else if (dt == "F16") t.dtype = DType::F16;
    else if (dt == "F32") t.dtype = DType::F32;
    else if (dt == "F8_E4M3") t.dtype = DType::F8_E4M3;  // block-FP8 projections
    else if (dt == "I32") t.dtype = DType::I32;          // AWQ qweight / qzeros
    else if (dt == "I64") t.dtype = DType::I64;          // EAGLE-3 heads' d2t (draft → target id offsets)
    else if (dt == "BOOL") t.dtype = DType::I8;          // EAGLE-3 heads' t2d mask: one byte, never read
    else fail(path, ": tensor '", name, "': dtype ", dt, " is not supported (supported: BF16, F16, F32, F8_E4M3, I32, I64, BOOL)");
    if (!e.contains("shape") || !e["shape"].is_array()) fail(path, ": tensor '", name, "': missing list 'shape'");
    // numel must not overflow: bound every dim and the running product by the data size.
    uint64_t numel = 1;
    for (const auto& d : e["shape"]) {
      if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
        fail(path, ": tensor '", name, "': shape must hold non-negative integers, got ", e["shape"].dump());
      uint64_t v = d.get<uint64_t>();
      if (v > data_size + 1 || (v && numel > (data_size + 1) / v) )
        fail(path, ": tensor '", name, "': shape ", e["shape"].dump(), " is larger than the file's data area");
      numel *= v;
      t.shape.push_back(static_cast<int64_t>(v));
    }
    if (!e.contains("data_offsets") || !e["data_offsets"].is_array() || e["data_offsets"].size() != 2 ||
        !e["data_offsets"][0].is_number_unsigned() || !e["data_offsets"][1].is_number_unsigned())
      fail(path, ": tensor '", name, "': data_offsets must be [begin, end] of non-negative integers");
    uint64_t b = e["data_offsets"][0].get<uint64_t>(), en = e["data_offsets"][1].get<uint64_t>();
    if (b > en) fail(path, ": tensor '", name, "': data_offsets begin ", b, " > end ", en);
    if (en > data_size)
      fail(path, ": tensor '", name, "': data_offsets [", b, ", ", en, "] lie outside the data area (", data_size,
           " bytes)");
    uint64_t want = numel * dtype_size(t.dtype);
    if (en - b != want)
      fail(path, ": tensor '", name, "': data_offsets span ", en - b, " bytes but ", dt, " ", shape_str(t.shape),
           " needs ", want);
    t.begin = b;
    t.end = en;
    out.push_back(std::move(t));
  }
  // No two tensors may share bytes (zero-size tensors overlap nothing).
  std::vector<const SafetensorInfo*> by_off;
  for (const auto& t : out)
    if (t.end > t.begin) by_off.push_back(&t);
  std::sort(by_off.begin(), by_off.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_off.size(); i++)
    if (by_off[i]->begin < by_off[i - 1]->end)
      fail(path, ": tensors '", by_off[i - 1]->name, "' and '", by_off[i]->name, "' overlap in the data area");
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  *data_start = 8 + n;
  return out;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, ": cannot open: ", std::strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    fail(path, ": cannot stat: ", std::strerror(err));
  }
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      fail(path, ": cannot mmap: ", std::strerror(err));
    }
    f->base_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  f->tensors_ = parse_safetensors_header(f->base_, f->size_, path, &f->data_start_);
  for (size_t i = 0; i < f->tensors_.size(); i++) f->index_[f->tensors_[i].name] = i;
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (base_) munmap(const_cast<uint8_t*>(base_), size_);
}

const SafetensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::release(const SafetensorInfo& t) const {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  uintptr_t b = reinterpret_cast<uintptr_t>(data(t));
  uintptr_t e = b + (t.end - t.begin);
  // Only whole pages inside the tensor: neighbours' bytes may still be needed.
  uintptr_t pb = (b + page - 1) & ~(page - 1), pe = e & ~(page - 1);
  if (pe > pb) madvise(reinterpret_cast<void*>(pb), pe - pb, MADV_DONTNEED);
}

void write_safetensors(const std::string& path, const std::vector<SafetensorWrite>& tensors) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  h["__metadata__"] = {{"format", "pt"}};
  size_t off = 0;
  std::vector<size_t> offs;
  for (const auto& t : tensors) {
    off = (off + 63) & ~size_t(63);
    size_t bytes = static_cast<size_t>(shape_numel(t.shape)) * dtype_size(t.dtype);
    h[t.name] = {{"dtype", dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {off, off + bytes}}};
    offs.push_back(off);
    off += bytes;
  }
  std::string hs = h.dump();
  // Pad the header with spaces so the data area starts 64-byte aligned in the file.
  while ((8 + hs.size()) % 64) hs.push_back(' ');
  std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) fail(tmp, ": cannot create: ", std::strerror(errno));
  uint8_t len[8];
  uint64_t n = hs.size();
  for (int i = 0; i < 8; i++) len[i] = static_cast<uint8_t>(n >> (8 * i));
  bool ok = std::fwrite(len, 1, 8, f) == 8 && std::fwrite(hs.data(), 1, hs.size(), f) == hs.size();
  size_t pos = 0;
  static const char zeros[64] = {};
  AlignedBuffer buf;
  for (size_t i = 0; ok && i < tensors.size(); i++) {
    if (offs[i] > pos) ok = std::fwrite(zeros, 1, offs[i] - pos, f) == offs[i] - pos;
    size_t bytes = static_cast<size_t>(shape_numel(tensors[i].shape)) * dtype_size(tensors[i].dtype);
    if (buf.size() < bytes) buf = AlignedBuffer(bytes);
    tensors[i].fill(buf.data());
    ok = ok && std::fwrite(buf.data(), 1, bytes, f) == bytes;
    pos = offs[i] + bytes;
  }
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) fail(tmp, ": write failed: ", std::strerror(errno));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(path, ": cannot rename from ", tmp, ": ", std::strerror(errno));
}

}  // namespace pypto
