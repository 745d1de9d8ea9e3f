#include "model/test_model_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "core/error.h"
#include "model/test_model_hybrid.h"

namespace fs = std::filesystem;

namespace pypto {
namespace {

// FNV-1a, 64 bits: the same digits on every build (std::hash promises no such thing), so a
// cache directory keeps its name across compilers.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// A name no other maker uses at the same time: the process, the thread and a counter (two
// threads of one process would collide on the process id alone).
std::string private_suffix() {
  static std::atomic<uint64_t> counter{0};
  const size_t thread = std::hash<std::thread::id>{}(std::this_thread::get_id());
  char buf[96];
  std::snprintf(buf, sizeof buf, ".tmp.%d.%zx.%llu", int(getpid()), thread,
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return buf;
}

}  // namespace

std::string test_model_key(const TestModelOptions& o) {
  return str_cat("preset=", o.preset, " layers=", o.layers ? *o.layers : -1, " dtype=", dtype_name(o.dtype),
                 " shards=", o.shards, " qk_norm=", o.qk_norm, " qwen2=", o.qwen2, " seed=", o.seed,
                 " quant=", quant_method_name(o.quant), " quant_group=", o.quant_group,
                 o.text_only ? " text_only=1" : "",  // (absent when false: older keys stay valid)
                 o.eagle3.empty() ? "" : " eagle3=" + o.eagle3,
                 is_hybrid_test_model_preset(o.preset) ? " mtp=" + o.mtp : "");  // hybrids: the MTP head's kind
}

void build_directory_once(const std::string& dir, const std::function<void(const std::string& tmp)>& make) {
  const fs::path final_dir(dir);
  if (fs::exists(final_dir / ".complete")) return;
  fs::create_directories(final_dir.parent_path());
  const fs::path tmp = final_dir.string() + private_suffix();
  fs::remove_all(tmp);
  fs::create_directories(tmp);
  try {
    make(tmp.string());
    std::ofstream(tmp / ".complete") << "ok\n";
  } catch (...) {
    fs::remove_all(tmp);
    throw;
  }
  std::error_code ec;
  fs::rename(tmp, final_dir, ec);  // atomic; fails when another maker's directory is already there
  if (ec) fs::remove_all(tmp);
  if (!fs::exists(final_dir / ".complete"))
    fail(dir, ": could not be created (", ec ? ec.message() : "no .complete marker", ")");
}

std::string cached_test_model(const std::string& parent, const std::string& name, TestModelOptions opt) {
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fnv1a(test_model_key(opt))));
  const std::string dir = (fs::path(parent) / (name + "-" + hex)).string();
  build_directory_once(dir, [&](const std::string& tmp) {
    opt.out_dir = tmp;
    make_test_model(opt);
  });
  return dir;
}

}  // namespace pypto
