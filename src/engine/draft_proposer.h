#pragma once
// A drafter for speculative decoding: given a request's verified tokens (prompt + output so far),
// it proposes up to k tokens that the target model will verify in one (k + 1)-row step. Drafters
// see only verified tokens, so a rejected draft never feeds a later proposal.
//
// n-gram prompt lookup (engine/ngram_proposer.h) is the one drafter built; a draft model, EAGLE
// heads or MTP layers would implement this interface too.
#include <cstdint>
#include <span>
#include <vector>

namespace pypto {

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  // Appends 0 .. k proposed tokens to `out` (cleared first). Must be deterministic: the same
  // tokens give the same proposal, so runs are reproducible.
  virtual void propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const = 0;
};

}  // namespace pypto
