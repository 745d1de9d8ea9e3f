// KvCache::prefault maps the whole pool at once and leaves it zero.
#include <gtest/gtest.h>

#include <cstdint>

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

}  // namespace
}  // namespace pypto
