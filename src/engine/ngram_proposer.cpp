#include "engine/ngram_proposer.h"

#include <algorithm>

#include "core/error.h"

namespace pypto {

NgramProposer::NgramProposer(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {
  PYPTO_ASSERT(min_n >= 1 && max_n >= min_n, "n-gram window [", min_n, ", ", max_n, "]");
}

void NgramProposer::propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const {
  out.clear();
  const int64_t len = int64_t(tokens.size());
  if (k < 1) return;
  for (int64_t n = std::min<int64_t>(max_n_, len - 1); n >= min_n_; --n) {
    const std::span<const int32_t> suffix = tokens.subspan(size_t(len - n));
    // Occurrences start at i <= len - n - 1, so at least one token follows each.
    for (int64_t i = 0; i + n < len; ++i) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + i)) continue;
      const int64_t end = std::min<int64_t>(i + n + k, len);
      out.assign(tokens.begin() + (i + n), tokens.begin() + end);
      return;
    }
  }
}

}  // namespace pypto
