#pragma once
// Storage of the paged KV cache: for every layer a K and a V pool of
// [num_blocks, n_kv_heads, block_size, head_dim] elements in bf16, f32, int8 or fp8 e4m3 (this
// rank's KV heads); the 8-bit pools come with their row scales, [num_blocks, n_kv_heads,
// block_size] f32 each (kernels/kv_quant.h).
// Which blocks belong to which sequence is the engine's business (BlockPool / KVCacheManager);
// this class only owns the memory and hands out the per-layer views the kernels read.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/memory.h"
#include "kernels/backend.h"

namespace pypto {

struct KvCacheSpec {
  int32_t num_layers = 0;
  int64_t num_blocks = 0;
  int32_t block_size = 16;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  DType dtype = DType::BF16;  // BF16, F32, I8 or F8_E4M3 (core/kv_dtype.h)

  // Bytes one block costs across all layers, K and V together (8-bit: codes and row scales).
  size_t bytes_per_block() const;
};

class KvCache {
 public:
  KvCache() = default;
  // Allocates (zeroed, 64-byte aligned) all layers' pools; throws Error for an unsupported dtype
  // or a zero size.
  explicit KvCache(const KvCacheSpec& spec);

  const KvCacheSpec& spec() const { return spec_; }
  const KvCacheLayer& layer(int i) const { return layers_[i]; }
  int32_t num_layers() const { return spec_.num_layers; }
  int64_t num_blocks() const { return spec_.num_blocks; }
  int32_t block_size() const { return spec_.block_size; }
  size_t bytes() const { return storage_.size(); }
  // Writes every page of the pools now (they stay zero), so the kernel maps them at start-up
  // instead of on the first step that stores into each block (page faults and zeroing inside
  // steps: ~4 % of a benchmark that fills a fresh 2 GiB pool), and memory that is not really
  // there fails at start-up rather than in the middle of serving.
  void prefault();

 private:
  KvCacheSpec spec_;
  AlignedBuffer storage_;
  std::vector<KvCacheLayer> layers_;
};

}  // namespace pypto
