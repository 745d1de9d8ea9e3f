#pragma once
// How many KV blocks fit: from --kv-cache-memory bytes, or --memory-utilization (default 0.9) of
// the memory still available after the weights are loaded.
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"

namespace pypto {

inline constexpr double kDefaultMemoryUtilization = 0.9;

// Bytes of one block across all layers: layers x 2 (K and V) x block_size x n_kv_heads x head_dim
// x dtype size.
int64_t kv_bytes_per_block(int32_t num_layers, int32_t block_size, int32_t num_kv_heads, int32_t head_dim,
                           DType kv_dtype);

struct KvCapacityRequest {
  int64_t bytes_per_block = 0;
  int32_t block_size = 16;
  int64_t max_model_len = 0;
  std::optional<int64_t> kv_cache_memory;  // --kv-cache-memory, wins when given
  double memory_utilization = kDefaultMemoryUtilization;
  int64_t available_bytes = 0;             // free memory after weights (used without kv_cache_memory)
};

struct KvCapacity {
  int64_t kv_bytes = 0;        // the budget the blocks were cut from
  int64_t num_blocks = 0;
  int64_t token_capacity = 0;  // num_blocks * block_size
  double max_concurrency = 0;  // sequences of max_model_len tokens that fit at once
  std::string summary() const;  // the start-up log line
};

// Throws Error naming the flag when the budget cannot hold one sequence of max_model_len tokens.
KvCapacity plan_kv_capacity(const KvCapacityRequest& req);

}  // namespace pypto
