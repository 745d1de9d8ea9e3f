#pragma once
// n-gram prompt lookup: drafts come from the request's own context. The rule (part of the
// engine's reproducible behaviour, so fixed here):
//   for n = max .. min (longest first): let S be the last n tokens of the context; find the
//   earliest position i with context[i, i + n) == S and i + n < len (an occurrence that is not the
//   suffix itself, followed by at least one token); propose context[i + n, min(i + n + k, len)).
//   No match for any n: no drafts.
// Example: context [1 2 3 4 2 3], n in [2, 3], k 4: [4 2 3] is not repeated, [2 3] is at 1 ->
// proposes [4 2 3] (three tokens: the continuation reaches the end of the context).
// Cost: O(len * (max - min + 1)) comparisons of short runs per request per step, microseconds for
// contexts of a few thousand tokens, small beside a decode step (~10 ms and up).
#include "engine/draft_proposer.h"

namespace pypto {

class NgramProposer final : public DraftProposer {
 public:
  // 1 <= min_n <= max_n (SpeculativeConfig::validate checks the user's values).
  NgramProposer(int32_t min_n, int32_t max_n);
  void propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const override;

 private:
  int32_t min_n_, max_n_;
};

}  // namespace pypto
