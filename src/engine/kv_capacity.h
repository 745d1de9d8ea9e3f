#pragma once
// How many KV blocks the pool gets: --kv-cache-memory bytes; or --memory-utilization of the memory
// still available after the weights are loaded (the GPU convention); or, with neither, the CPU
// default: what the configuration can use, max-num-seqs sequences of max-model-len tokens plus
// half as much again for the prefix cache, capped at kDefaultMemoryUtilization of the available
// memory. On a CPU host the pool shares memory with everything else, its pages stay resident once
// touched, and a pool sized from free memory would keep a second server from starting.
#include <cstdint>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "core/kv_dtype.h"

namespace pypto {

inline constexpr double kDefaultMemoryUtilization = 0.9;

// Bytes of one block across all layers: layers x 2 (K and V) x block_size x n_kv_heads x the bytes
// of one row (head_dim x dtype size, plus the row's f32 scale for int8 / fp8: core/kv_dtype.h).
int64_t kv_bytes_per_block(int32_t num_layers, int32_t block_size, int32_t num_kv_heads, int32_t head_dim,
                           DType kv_dtype);

struct KvCapacityRequest {
  int64_t bytes_per_block = 0;
  int32_t block_size = 16;
  int64_t max_model_len = 0;
  std::optional<int64_t> kv_cache_memory;    // --kv-cache-memory, wins when given
  std::optional<double> memory_utilization;  // --memory-utilization: that fraction of available_bytes
  int32_t max_num_seqs = 1;                  // neither flag: the default from these two
  bool prefix_caching = true;
  int64_t available_bytes = 0;               // free memory after weights (for all but kv_cache_memory)
  // Memory the drafter keeps beside the pool (the MTP / EAGLE-3 proposer's kept hidden rows,
  // drafter_kept_hidden_bytes in parallel/replicas/mtp_load.h): taken out of available_bytes
  // before the pool is sized from it, and named in the log line.
  int64_t drafter_bytes = 0;
};

// Blocks of the default pool: max_num_seqs x ceil(max_model_len / block_size), times 1.5 (rounded
// up) with prefix caching, before the cap by available memory.
int64_t default_kv_blocks(int32_t max_num_seqs, int64_t max_model_len, int32_t block_size, bool prefix_caching);

struct KvCapacity {
  int64_t kv_bytes = 0;        // the budget the blocks were cut from
  int64_t num_blocks = 0;
  int64_t token_capacity = 0;  // num_blocks * block_size
  double max_concurrency = 0;  // sequences of max_model_len tokens that fit at once
  std::string basis;           // how the default was sized (empty when a flag set the size)
  int64_t drafter_bytes = 0;   // KvCapacityRequest::drafter_bytes, outside the pool
  std::string summary() const;  // the start-up log line
};

// Throws Error naming the flag when the budget cannot hold one sequence of max_model_len tokens.
KvCapacity plan_kv_capacity(const KvCapacityRequest& req);

}  // namespace pypto
