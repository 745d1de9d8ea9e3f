// Compile cache: a warm start returns the same slab bytes; stale, partial and corrupt entries are
// never used.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io/checkpoint.h"
#include "kernels/backend.h"
#include "model/compile_cache.h"
#include "model/test_model.h"
#include "model/weight_staging.h"

using namespace pypto;
namespace fs = std::filesystem;

namespace {

struct CacheFixture : ::testing::Test {
  fs::path root = fs::temp_directory_path() / ("pypto_cc_test_" + std::to_string(getpid()));
  fs::path model = root / "model";
  fs::path cache = root / "cache";
  std::unique_ptr<Backend> backend = make_cpu_backend(1);

  void SetUp() override {
    fs::remove_all(root);
    TestModelOptions o;
    o.out_dir = model.string();
    o.show_progress = false;
    make_test_model(o);
  }
  void TearDown() override { fs::remove_all(root); }

  Qwen3Weights stage(bool cached) {
    auto ck = Checkpoint::open(model.string());
    StagingOptions opt;
    opt.show_progress = false;
    if (cached) opt.compile_cache_dir = cache.string();
    return stage_qwen3_weights(*ck, *backend, opt);
  }
  std::string key() {
    auto ck = Checkpoint::open(model.string());
    return staging_fingerprint(*ck, *backend, 0, 1);
  }
  static bool same_bytes(const Qwen3Weights& a, const Qwen3Weights& b) {
    // The embedding sits at the start of the slab: compare the whole slab from there.
    return a.resident_bytes == b.resident_bytes && std::memcmp(a.embed, b.embed, a.resident_bytes) == 0;
  }
};

}  // namespace

TEST_F(CacheFixture, WarmStartHitsAndMatchesStaging) {
  Qwen3Weights plain = stage(false);
  Qwen3Weights first = stage(true);
  EXPECT_FALSE(first.from_compile_cache);
  ASSERT_TRUE(fs::exists(compile_cache_path(cache.string(), key())));
  Qwen3Weights warm = stage(true);
  EXPECT_TRUE(warm.from_compile_cache);
  EXPECT_TRUE(same_bytes(plain, warm));
  // Pointers are laid out the same way relative to the slab.
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(warm.layers[1].down.data) - static_cast<const uint8_t*>(warm.embed),
            reinterpret_cast<const uint8_t*>(plain.layers[1].down.data) - static_cast<const uint8_t*>(plain.embed));
}

TEST_F(CacheFixture, CorruptAndPartialEntriesAreRebuilt) {
  stage(true);
  const std::string path = compile_cache_path(cache.string(), key());
  {  // flip one byte in the data area
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4096 + 1000);
    char c = 0x5a;
    f.write(&c, 1);
  }
  Qwen3Weights w = stage(true);
  EXPECT_FALSE(w.from_compile_cache) << "a corrupt entry must not be used";
  EXPECT_TRUE(stage(true).from_compile_cache) << "and it is rebuilt";
  fs::resize_file(path, fs::file_size(path) / 2);  // partial entry
  EXPECT_FALSE(stage(true).from_compile_cache);
  EXPECT_TRUE(stage(true).from_compile_cache);
}

TEST_F(CacheFixture, ChangedCheckpointIsAnotherKey) {
  std::string k0 = key();
  // Any change to config.json or a safetensors header changes the fingerprint.
  std::string cfg = (model / "config.json").string();
  std::ifstream in(cfg);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(cfg) << text << " ";
  EXPECT_NE(key(), k0);
  auto ck = Checkpoint::open(model.string());
  EXPECT_NE(staging_fingerprint(*ck, *backend, 0, 2), staging_fingerprint(*ck, *backend, 1, 2))
      << "each tensor-parallel rank has its own entry";
}
