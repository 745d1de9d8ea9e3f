#include "model/kv_cache.h"

#include "core/error.h"
#include "core/kv_dtype.h"

namespace pypto {

namespace {
// One pool (K or V of one layer), rounded up to 64 bytes so every pool starts aligned.
size_t pool_bytes(const KvCacheSpec& s) {
  const size_t n = size_t(s.num_blocks) * s.block_size * s.n_kv_heads * s.head_dim * dtype_size(s.dtype);
  return (n + 63) / 64 * 64;
}
// One pool's row scales (8-bit dtypes: [num_blocks, n_kv_heads, block_size] f32), 64-byte multiple.
size_t scale_bytes(const KvCacheSpec& s) {
  if (!kv_dtype_is_8bit(s.dtype)) return 0;
  const size_t n = size_t(s.num_blocks) * s.block_size * s.n_kv_heads * sizeof(float);
  return (n + 63) / 64 * 64;
}
}  // namespace

size_t KvCacheSpec::bytes_per_block() const {
  return size_t(2) * num_layers * block_size * n_kv_heads * size_t(kv_row_bytes(dtype, head_dim));
}

KvCache::KvCache(const KvCacheSpec& spec) : spec_(spec) {
  if (!kv_dtype_supported(spec.dtype))
    fail("KV cache dtype must be bf16, fp32, int8 or fp8 (e4m3), got ", dtype_name(spec.dtype));
  if (spec.num_layers <= 0 || spec.num_blocks <= 0 || spec.block_size <= 0 || spec.n_kv_heads <= 0 ||
      spec.head_dim <= 0)
    fail("KV cache needs positive sizes (layers ", spec.num_layers, ", blocks ", spec.num_blocks, ", block size ",
         spec.block_size, ", kv heads ", spec.n_kv_heads, ", head dim ", spec.head_dim, ")");
  // Per layer: K codes, V codes, then (8-bit) K scales, V scales.
  const size_t pool = pool_bytes(spec), sc = scale_bytes(spec), layer_bytes = 2 * (pool + sc);
  storage_ = AlignedBuffer(layer_bytes * spec.num_layers);
  layers_.resize(spec.num_layers);
  for (int32_t l = 0; l < spec.num_layers; ++l) {
    KvCacheLayer& c = layers_[l];
    uint8_t* base = storage_.data() + layer_bytes * size_t(l);
    c.k = base;
    c.v = base + pool;
    if (sc > 0) {
      c.k_scale = reinterpret_cast<float*>(base + 2 * pool);
      c.v_scale = reinterpret_cast<float*>(base + 2 * pool + sc);
    }
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
