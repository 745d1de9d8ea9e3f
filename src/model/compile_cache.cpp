#include "model/compile_cache.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "io/json_fields.h"
#include "model/test_model.h"

namespace fs = std::filesystem;

namespace pypto {
namespace {

constexpr char kMagic[8] = {'P', 'Y', 'P', 'T', 'O', 'C', 'C', '1'};
constexpr size_t kHeaderBytes = 4096;  // data starts page-aligned

// Entry header (first kHeaderBytes of the file; the rest zero).
struct Header {
  char magic[8];
  uint64_t version;
  uint64_t data_bytes;
  uint64_t checksum;
  char key[65];  // hex SHA-256, NUL-terminated
};

// A fast 64-bit checksum over the slab (detects truncation and corruption, not adversaries):
// per 8-byte word, multiply-xor mixing with the word's index so reordering is caught too.
uint64_t slab_checksum(const uint8_t* p, size_t n) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
  size_t words = n / 8;
  for (size_t i = 0; i < words; i++) {
    uint64_t w;
    std::memcpy(&w, p + 8 * i, 8);
    h ^= (w + i) * 0xff51afd7ed558ccdull;
    h = (h << 27) | (h >> 37);
  }
  for (size_t i = words * 8; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

std::string hex(const unsigned char* d, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; i++) {
    s.push_back(digits[d[i] >> 4]);
    s.push_back(digits[d[i] & 15]);
  }
  return s;
}

struct Sha256 {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  Sha256() { EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr); }
  ~Sha256() { EVP_MD_CTX_free(ctx); }
  void add(const void* p, size_t n) { EVP_DigestUpdate(ctx, p, n); }
  void add(const std::string& s) {
    uint64_t n = s.size();
    add(&n, sizeof n);  // length-prefixed: field boundaries are unambiguous
    add(s.data(), s.size());
  }
  std::string finish() {
    unsigned char d[32];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, d, &len);
    return hex(d, len);
  }
};

bool read_all(int fd, uint8_t* dst, size_t n) {
  while (n > 0) {
    ssize_t r = ::read(fd, dst, n > (1u << 30) ? (1u << 30) : n);
    if (r <= 0) return false;
    dst += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool write_all(int fd, const uint8_t* src, size_t n) {
  while (n > 0) {
    ssize_t r = ::write(fd, src, n > (1u << 30) ? (1u << 30) : n);
    if (r <= 0) return false;
    src += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

}  // namespace

std::string default_compile_cache_dir() { return cache_dir() + "/compile-cache"; }

std::string compile_cache_path(const std::string& dir, const std::string& key) { return dir + "/" + key + ".slab"; }

std::string staging_fingerprint(const Checkpoint& ck, const Backend& backend, int tp_rank, int tp_size,
                                const std::string& weights) {
  Sha256 h;
  h.add(std::string("pypto-staging-layout-") + std::to_string(kStagingLayoutVersion));
  h.add("weights " + weights);
  h.add(std::string(backend.name()));
  for (DType dt : {DType::BF16, DType::F16, DType::F32}) h.add(backend.weight_layout_is_plain(dt) ? "plain" : "packed");
  h.add(std::to_string(tp_rank) + "/" + std::to_string(tp_size));
  h.add(read_text_file(ck.path("config.json")));
  for (const auto& f : ck.files()) {
    h.add(fs::path(f->path()).filename().string());
    h.add(std::to_string(f->file_size()));
    // The header names every tensor's dtype, shape and offsets: hash its bytes.
    int fd = ::open(f->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(f->path(), ": cannot open: ", std::strerror(errno));
    uint8_t len8[8];
    bool ok = read_all(fd, len8, 8);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | len8[i];
    std::string header(ok ? n : 0, '\0');
    ok = ok && read_all(fd, reinterpret_cast<uint8_t*>(header.data()), n);
    ::close(fd);
    if (!ok) fail(f->path(), ": cannot read the safetensors header for the compile-cache fingerprint");
    h.add(header);
  }
  return h.finish();
}

bool compile_cache_load(const std::string& dir, const std::string& key, uint8_t* dst, size_t bytes) {
  const std::string path = compile_cache_path(dir, key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  auto reject = [&](const char* why) {
    ::close(fd);
    log_warn("compile cache: ", path, " is ", why, "; removing it and staging again");
    std::error_code ec;
    fs::remove(path, ec);
    return false;
  };
  uint8_t hbuf[kHeaderBytes];
  if (!read_all(fd, hbuf, kHeaderBytes)) return reject("truncated (no header)");
  Header hd;
  std::memcpy(&hd, hbuf, sizeof hd);
  if (std::memcmp(hd.magic, kMagic, 8) != 0 || hd.version != kStagingLayoutVersion) return reject("not a current entry");
  hd.key[64] = '\0';
  if (key != hd.key) return reject("for another key");
  if (hd.data_bytes != bytes) return reject("of the wrong size");
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != kHeaderBytes + bytes) return reject("truncated");
  if (!read_all(fd, dst, bytes)) return reject("unreadable");
  if (slab_checksum(dst, bytes) != hd.checksum) return reject("corrupt (checksum mismatch)");
  ::close(fd);
  return true;
}

bool compile_cache_store(const std::string& dir, const std::string& key, const uint8_t* src, size_t bytes) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  const std::string path = compile_cache_path(dir, key);
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    log_warn("compile cache: cannot create ", tmp, ": ", std::strerror(errno), "; continuing without caching");
    return false;
  }
  uint8_t hbuf[kHeaderBytes] = {};
  Header hd{};
  std::memcpy(hd.magic, kMagic, 8);
  hd.version = kStagingLayoutVersion;
  hd.data_bytes = bytes;
  hd.checksum = slab_checksum(src, bytes);
  std::snprintf(hd.key, sizeof hd.key, "%s", key.c_str());
  std::memcpy(hbuf, &hd, sizeof hd);
  bool ok = write_all(fd, hbuf, kHeaderBytes) && write_all(fd, src, bytes) && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    log_warn("compile cache: cannot write ", path, ": ", std::strerror(errno), "; continuing without caching");
    fs::remove(tmp, ec);
    return false;
  }
  return true;
}

}  // namespace pypto
