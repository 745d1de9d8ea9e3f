#pragma once
// BPE merge lookup: (left id, right id) -> (rank, merged id). An open-addressing table with
// 64-bit keys, because this lookup is the inner loop of encoding and std::unordered_map's
// node-per-entry layout costs a cache miss per probe.
#include <cstdint>
#include <optional>
#include <vector>

namespace pypto {

struct Merge {
  int32_t rank;    // position in the merges list: lower merges first
  int32_t result;  // id of the concatenated token
};

class MergeTable {
 public:
  explicit MergeTable(size_t expected = 0);

  // Returns false if the pair is already present (the first rank is kept).
  bool insert(int32_t left, int32_t right, Merge merge);

  std::optional<Merge> find(int32_t left, int32_t right) const {
    const uint64_t key = pack(left, right);
    for (size_t i = slot(key);; i = (i + 1) & mask_) {
      const Entry& e = entries_[i];
      if (e.key == key) return e.merge;
      if (e.key == kEmpty) return std::nullopt;
    }
  }

  size_t size() const { return size_; }

 private:
  struct Entry {
    uint64_t key;
    Merge merge;
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are non-negative, so never a real key

  static uint64_t pack(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  size_t slot(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_); }
  void grow();

  std::vector<Entry> entries_;
  size_t mask_ = 0;
  int shift_ = 64;
  size_t size_ = 0;
};

}  // namespace pypto
