#include "parallel/prefix_index.h"

#include "core/error.h"

namespace pypto {
namespace {

// splitmix64 finaliser: a cheap, well-mixed 64-bit hash step.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

PrefixIndex::PrefixIndex(int32_t block_size, size_t max_blocks) : block_size_(block_size), max_blocks_(max_blocks) {
  PYPTO_ASSERT(block_size > 0 && max_blocks > 0, "block_size ", block_size, " max_blocks ", max_blocks);
}

// hash_k = H(hash_{k-1}, tokens of block k): a block's hash names its whole prefix, like the
// engine's own block hashes.
std::vector<uint64_t> PrefixIndex::block_hashes(const std::vector<int32_t>& tokens) const {
  std::vector<uint64_t> hashes;
  uint64_t h = 0x70797074u;
  const size_t full = tokens.size() / size_t(block_size_);
  for (size_t b = 0; b < full; ++b) {
    for (int32_t j = 0; j < block_size_; ++j) h = mix(h ^ uint32_t(tokens[b * size_t(block_size_) + size_t(j)]));
    hashes.push_back(h);
  }
  return hashes;
}

int64_t PrefixIndex::match(const std::vector<int32_t>& tokens) const {
  const std::vector<uint64_t> hashes = block_hashes(tokens);
  std::lock_guard<std::mutex> lock(mu_);
  size_t k = 0;
  while (k < hashes.size() && map_.count(hashes[k])) ++k;
  return int64_t(k) * block_size_;
}

void PrefixIndex::insert(const std::vector<int32_t>& tokens) {
  const std::vector<uint64_t> hashes = block_hashes(tokens);
  std::lock_guard<std::mutex> lock(mu_);
  // Deepest block first, so a prefix's first blocks end up most recent and are evicted last (a
  // later block is useless without the ones before it).
  for (auto hit = hashes.rbegin(); hit != hashes.rend(); ++hit) {
    const uint64_t h = *hit;
    auto it = map_.find(h);
    if (it != map_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
    } else {
      lru_.push_front(h);
      map_[h] = lru_.begin();
    }
  }
  while (map_.size() > max_blocks_) {
    map_.erase(lru_.back());
    lru_.pop_back();
  }
}

size_t PrefixIndex::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

}  // namespace pypto
