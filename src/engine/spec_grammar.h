#pragma once
// Grammar-constrained requests under speculative decoding (structured outputs, tool calls).
//
// A constrained request verifying drafts d[0..k) has k + 1 rows; plain decoding would sample the
// token at row j's position under the grammar state reached after the verified output and
// d[0..j). So each row gets the mask of that state: DraftGrammarStates advances copies of the
// sequence's matcher along the drafts (copy j has accepted d[0..j)). The sequence's own matcher
// only ever accepts verified tokens (the run the verify emits), so rolling the grammar back past
// a rejected draft is dropping the copies, the same way the KV of rejected drafts is dropped.
//
// A draft the grammar forbids can never be accepted: row j's mask excludes d[j], so the row's
// token differs from it (greedy, seeded draws) and rejection sampling sees p(d[j]) = 0. Drafts
// after the first forbidden one could not be reached, so the scheduler drops them before the
// step (grammar_draft_limit); the forbidden draft itself stays, because rejection sampling against
// a draft model's q is only exact when every drawn draft is verified (its rejection draws the
// residual max(0, p - q), not p).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "structured/matcher.h"

namespace pypto {

// How many of `drafts` are worth verifying for a sequence whose grammar is at `matcher`: the
// drafts the grammar allows in a row, plus the first one it forbids (if any).
size_t grammar_draft_limit(const structured::GrammarMatcher& matcher, std::span<const int32_t> drafts);

class DraftGrammarStates {
 public:
  // `matcher`: the sequence's state after its verified output (copied, never modified).
  DraftGrammarStates(const structured::GrammarMatcher& matcher, std::span<const int32_t> drafts);

  // Row j's allowed tokens (j in [0, drafts.size()]), or null when the row is unconstrained
  // (before the grammar starts, a lazy grammar waiting for its trigger, or a row after a
  // forbidden draft, which is never emitted). Valid while this object lives.
  const structured::TokenMask* mask(size_t j);
  // Computes every row's mask now (the engine does this while the model runs, so sampling finds
  // them cached; a state's first mask walks the vocabulary trie).
  void compute_masks();
  // Whether every row's mask is only a lookup now.
  bool masks_cached() const;
  // The number of leading drafts the grammar allows (rows [0, num_allowed()] have a state).
  size_t num_allowed() const { return states_.size() - 1; }
  size_t num_rows() const { return num_rows_; }

 private:
  std::vector<structured::GrammarMatcher> states_;  // states_[j]: after d[0..j)
  size_t num_rows_ = 0;
};

}  // namespace pypto
