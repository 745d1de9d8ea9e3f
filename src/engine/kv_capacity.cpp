#include "engine/kv_capacity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "core/memory.h"

namespace pypto {

int64_t kv_bytes_per_block(int32_t num_layers, int32_t block_size, int32_t num_kv_heads, int32_t head_dim,
                           DType kv_dtype) {
  return int64_t(num_layers) * 2 * block_size * num_kv_heads * kv_row_bytes(kv_dtype, head_dim);
}

int64_t default_kv_blocks(int32_t max_num_seqs, int64_t max_model_len, int32_t block_size, bool prefix_caching) {
  const int64_t running = int64_t(std::max(max_num_seqs, 1)) * ((max_model_len + block_size - 1) / block_size);
  return prefix_caching ? running + (running + 1) / 2 : running;
}

KvCapacity plan_kv_capacity(const KvCapacityRequest& req) {
  PYPTO_ASSERT(req.bytes_per_block > 0 && req.block_size > 0 && req.max_model_len > 0);
  PYPTO_ASSERT(req.drafter_bytes >= 0, "drafter bytes ", req.drafter_bytes);
  KvCapacity c;
  c.drafter_bytes = req.drafter_bytes;
  // The pool is cut from the memory the drafter's own buffers leave (not from --kv-cache-memory,
  // which sizes the pool itself).
  const int64_t available = std::max<int64_t>(req.available_bytes - req.drafter_bytes, 0);
  const char* source;
  if (req.kv_cache_memory) {
    if (*req.kv_cache_memory <= 0) fail("--kv-cache-memory must be > 0, got ", *req.kv_cache_memory);
    c.kv_bytes = *req.kv_cache_memory;
    source = "--kv-cache-memory";
  } else if (req.memory_utilization) {
    if (!(*req.memory_utilization > 0.0 && *req.memory_utilization <= 1.0))
      fail("--memory-utilization must be in (0, 1], got ", *req.memory_utilization);
    c.kv_bytes = int64_t(std::floor(double(available) * *req.memory_utilization));
    source = "--memory-utilization";
  } else {
    const int64_t want = default_kv_blocks(req.max_num_seqs, req.max_model_len, req.block_size, req.prefix_caching);
    const int64_t cap = int64_t(std::floor(double(available) * kDefaultMemoryUtilization));
    c.kv_bytes = std::min(want * req.bytes_per_block, cap);
    c.basis = str_cat("default: --max-num-seqs ", req.max_num_seqs, " x --max-model-len ", req.max_model_len,
                      req.prefix_caching ? " + 50% for the prefix cache" : "",
                      c.kv_bytes < want * req.bytes_per_block ? ", capped at 0.9 of the free memory" : "");
    source = "the default, capped at 0.9 of the free memory";
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
         " blocks, ", need, "): ",
         req.kv_cache_memory || req.memory_utilization
             ? str_cat("raise ", source, " or lower --max-model-len")
             : std::string("free memory, give --kv-cache-memory, or lower --max-model-len"));
  }
  return c;
}

std::string KvCapacity::summary() const {
  char mem[32];
  format_bytes(size_t(kv_bytes), mem, sizeof mem);
  char conc[32];
  std::snprintf(conc, sizeof conc, "%.2f", max_concurrency);
  char drafter[32];
  format_bytes(size_t(drafter_bytes), drafter, sizeof drafter);
  return str_cat("KV cache: ", mem, ", ", num_blocks, " blocks, ", token_capacity,
                 " tokens; max concurrency at max-model-len: ", conc, "x", basis.empty() ? "" : " (" + basis + ")",
                 drafter_bytes > 0 ? str_cat("; beside it the drafter's kept hidden rows, up to ", drafter) : "");
}

}  // namespace pypto
