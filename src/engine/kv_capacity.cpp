#include "engine/kv_capacity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/memory.h"

namespace pypto {

int64_t kv_bytes_per_block(int32_t num_layers, int32_t block_size, int32_t num_kv_heads, int32_t head_dim,
                           DType kv_dtype) {
  return int64_t(num_layers) * 2 * block_size * num_kv_heads * head_dim * int64_t(dtype_size(kv_dtype));
}

KvCapacity plan_kv_capacity(const KvCapacityRequest& req) {
  PYPTO_ASSERT(req.bytes_per_block > 0 && req.block_size > 0 && req.max_model_len > 0);
  KvCapacity c;
  const char* source;
  if (req.kv_cache_memory) {
    if (*req.kv_cache_memory <= 0) fail("--kv-cache-memory must be > 0, got ", *req.kv_cache_memory);
    c.kv_bytes = *req.kv_cache_memory;
    source = "--kv-cache-memory";
  } else {
    if (!(req.memory_utilization > 0.0 && req.memory_utilization <= 1.0))
      fail("--memory-utilization must be in (0, 1], got ", req.memory_utilization);
    c.kv_bytes = int64_t(std::floor(double(std::max<int64_t>(req.available_bytes, 0)) * req.memory_utilization));
    source = "--memory-utilization";
  }
  c.num_blocks = c.kv_bytes / req.bytes_per_block;
  c.token_capacity = c.num_blocks * req.block_size;
  const int64_t blocks_per_seq = (req.max_model_len + req.block_size - 1) / req.block_size;
  c.max_concurrency = double(c.num_blocks) / double(blocks_per_seq);
  if (c.num_blocks < blocks_per_seq) {
    char have[32], need[32];
    format_bytes(size_t(c.kv_bytes), have, sizeof have);
    format_bytes(size_t(blocks_per_seq * req.bytes_per_block), need, sizeof need);
    fail("KV cache of ", have, " (", source, ") holds ", c.num_blocks, " blocks = ", c.token_capacity,
         " tokens, fewer than one sequence of --max-model-len ", req.max_model_len, " (", blocks_per_seq,
         " blocks, ", need, "): raise ", source, " or lower --max-model-len");
  }
  return c;
}

std::string KvCapacity::summary() const {
  char mem[32];
  format_bytes(size_t(kv_bytes), mem, sizeof mem);
  char conc[32];
  std::snprintf(conc, sizeof conc, "%.2f", max_concurrency);
  return str_cat("KV cache: ", mem, ", ", num_blocks, " blocks, ", token_capacity,
                 " tokens; max concurrency at max-model-len: ", conc, "x");
}

}  // namespace pypto
