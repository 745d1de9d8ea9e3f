#pragma once
// Prefix-cache block hashes: a chain over full blocks, h_i = H(h_{i-1} || tokens of block i),
// with H = SHA-256 (OpenSSL). The hash only finds candidates; a hit is accepted only after the
// block's token ids and its parent block are verified (BlockPool::find_cached_block), so even a
// collision (or a deliberately weak hasher in tests) can never hand out wrong KV.
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <span>

namespace pypto {

struct BlockHash {
  std::array<uint8_t, 32> bytes{};
  bool operator==(const BlockHash&) const = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const {
    size_t v;
    std::memcpy(&v, h.bytes.data(), sizeof v);
    return v;
  }
};

// parent is null for the first block of a sequence.
using BlockHasher = std::function<BlockHash(const BlockHash* parent, std::span<const int32_t> tokens)>;

// SHA-256 over (parent bytes or a fixed 32-byte root) followed by the token ids as int32 LE.
BlockHash sha256_block_hash(const BlockHash* parent, std::span<const int32_t> tokens);

}  // namespace pypto
