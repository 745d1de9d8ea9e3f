#include "model/kv_cache.h"

#include "core/error.h"

namespace pypto {

namespace {
// One pool (K or V of one layer), rounded up to 64 bytes so every pool starts aligned.
size_t pool_bytes(const KvCacheSpec& s) {
  const size_t n = size_t(s.num_blocks) * s.block_size * s.n_kv_heads * s.head_dim * dtype_size(s.dtype);
  return (n + 63) / 64 * 64;
}
}  // namespace

size_t KvCacheSpec::bytes_per_block() const {
  return size_t(2) * num_layers * block_size * n_kv_heads * head_dim * dtype_size(dtype);
}

KvCache::KvCache(const KvCacheSpec& spec) : spec_(spec) {
  if (spec.dtype != DType::BF16 && spec.dtype != DType::F32)
    fail("KV cache dtype must be bf16 or fp32, got ", dtype_name(spec.dtype));
  if (spec.num_layers <= 0 || spec.num_blocks <= 0 || spec.block_size <= 0 || spec.n_kv_heads <= 0 ||
      spec.head_dim <= 0)
    fail("KV cache needs positive sizes (layers ", spec.num_layers, ", blocks ", spec.num_blocks, ", block size ",
         spec.block_size, ", kv heads ", spec.n_kv_heads, ", head dim ", spec.head_dim, ")");
  const size_t pool = pool_bytes(spec);
  storage_ = AlignedBuffer(pool * 2 * spec.num_layers);
  layers_.resize(spec.num_layers);
  for (int32_t l = 0; l < spec.num_layers; ++l) {
    KvCacheLayer& c = layers_[l];
    c.k = storage_.data() + pool * (2 * size_t(l));
    c.v = storage_.data() + pool * (2 * size_t(l) + 1);
    c.dtype = spec.dtype;
    c.num_blocks = spec.num_blocks;
    c.block_size = spec.block_size;
    c.n_kv_heads = spec.n_kv_heads;
    c.head_dim = spec.head_dim;
  }
}

void KvCache::prefault() {
  // One write per 4 KiB page (the smallest page the pool can be mapped with).
  volatile uint8_t* p = storage_.data();
  for (size_t off = 0; off < storage_.size(); off += 4096) p[off] = 0;
}

}  // namespace pypto
