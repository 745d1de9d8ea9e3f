#pragma once
// The compile cache (the seed's --use-compile-cache): staged, kernel-ready weight slabs written
// once and read back on a warm start instead of staging again.
//
// An entry is keyed by a SHA-256 fingerprint of everything that determines the slab's bytes: the
// checkpoint (config.json, every safetensors file's name, size and header hash), the staging
// layout version, the backend (ISA and its packed layout) and the tensor-parallel rank. A stale
// entry therefore has another key and is never found; a partial or corrupt one (wrong magic,
// size, key or checksum) is detected, removed and rebuilt. Writers use a private temporary file
// renamed into place, so concurrent starts never see or produce a torn entry.
#include <cstddef>
#include <cstdint>
#include <string>

#include "io/checkpoint.h"
#include "kernels/backend.h"

namespace pypto {

// Bump when the slab layout produced by stage_qwen3_weights changes.
// 2: vocab-parallel embedding and lm_head under TP; 3: bf16 pair panels on the bf16-dot backends.
inline constexpr int kStagingLayoutVersion = 7;  // 7: the MTP layer's k | v rows staged apart; 4: a tied table staged once, as the lm_head; 5: bf16 panels padded to 16 pairs (AMX tiles); 6: quantized weights

std::string default_compile_cache_dir();  // <cache_dir()>/compile-cache
// Hex SHA-256 fingerprint of the slab a staging run would produce.
// `weights` names the staged weight format (e.g. "float", "int8", "int4/g64") so that a warm start
// never reads a slab quantized differently.
std::string staging_fingerprint(const Checkpoint& ck, const Backend& backend, int tp_rank, int tp_size,
                                const std::string& weights = "float");

// Reads entry `key` into dst[bytes]. Returns false on a miss; a corrupt entry is logged,
// removed, and reported as a miss.
bool compile_cache_load(const std::string& dir, const std::string& key, uint8_t* dst, size_t bytes);
// Writes entry `key` atomically (errors are logged, not fatal: the run goes on without a cache).
// Returns whether the entry was written.
bool compile_cache_store(const std::string& dir, const std::string& key, const uint8_t* src, size_t bytes);
std::string compile_cache_path(const std::string& dir, const std::string& key);

}  // namespace pypto
