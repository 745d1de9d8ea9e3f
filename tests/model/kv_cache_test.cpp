// KvCache::prefault maps the whole pool at once and leaves it zero.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/memory.h"
#include "model/kv_cache.h"

namespace pypto {
namespace {

KvCacheSpec spec_of_mib(int64_t mib) {
  KvCacheSpec s;
  s.num_layers = 2;
  s.block_size = 16;
  s.n_kv_heads = 8;
  s.head_dim = 128;
  s.dtype = DType::BF16;
  s.num_blocks = mib * (1 << 20) / static_cast<int64_t>(s.bytes_per_block());
  return s;
}

TEST(KvCache, PrefaultMakesThePoolResidentAndKeepsItZero) {
  KvCache cache(spec_of_mib(64));
  const size_t before = rss_bytes();
  cache.prefault();
  const size_t after = rss_bytes();
  // The pool was only reserved before; every page is resident now.
  EXPECT_GE(after - before, cache.bytes() * 9 / 10) << "rss " << before << " -> " << after;
  const KvCacheLayer& l = cache.layer(1);
  const auto* k = static_cast<const uint16_t*>(l.k);
  const size_t elems = cache.bytes() / 4 / sizeof(uint16_t);  // one of the 4 pools (2 layers × K, V)
  for (size_t i = 0; i < elems; i += 997) ASSERT_EQ(k[i], 0) << "element " << i;
}

// An 8-bit cache: the spec's bytes per block count the row scales, every layer gets its K and V
// scales ([num_blocks, n_kv_heads, block_size] f32 each, inside the pool, disjoint), and the
// float caches get none.
TEST(KvCache, EightBitPoolsCarryTheirRowScales) {
  for (DType dt : {DType::I8, DType::F8_E4M3}) {
    KvCacheSpec s = spec_of_mib(1);
    s.dtype = dt;
    s.num_blocks = 5;
    EXPECT_EQ(s.bytes_per_block(), size_t(2) * 2 * 16 * 8 * (128 + 4));
    KvCache cache(s);
    EXPECT_GE(cache.bytes(), s.bytes_per_block() * 5);
    const uint8_t* lo = static_cast<const uint8_t*>(cache.layer(0).k);  // the storage starts with it
    const uint8_t* hi = lo + cache.bytes();
    const size_t codes = size_t(5) * 16 * 8 * 128, scales = size_t(5) * 16 * 8 * sizeof(float);
    std::vector<std::pair<const uint8_t*, size_t>> spans;
    for (int l = 0; l < 2; ++l) {
      const KvCacheLayer& c = cache.layer(l);
      ASSERT_NE(c.k_scale, nullptr);
      ASSERT_NE(c.v_scale, nullptr);
      EXPECT_EQ(c.dtype, dt);
      spans.push_back({static_cast<const uint8_t*>(c.k), codes});
      spans.push_back({static_cast<const uint8_t*>(c.v), codes});
      spans.push_back({reinterpret_cast<const uint8_t*>(c.k_scale), scales});
      spans.push_back({reinterpret_cast<const uint8_t*>(c.v_scale), scales});
    }
    std::sort(spans.begin(), spans.end());
    for (size_t i = 0; i < spans.size(); ++i) {
      EXPECT_GE(spans[i].first, lo);
      EXPECT_LE(spans[i].first + spans[i].second, hi);
      if (i + 1 < spans.size()) EXPECT_LE(spans[i].first + spans[i].second, spans[i + 1].first) << i;
    }
  }
  KvCache f(spec_of_mib(1));
  EXPECT_EQ(f.layer(0).k_scale, nullptr);
}

}  // namespace
}  // namespace pypto
