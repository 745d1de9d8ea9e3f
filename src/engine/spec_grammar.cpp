#include "engine/spec_grammar.h"

#include "core/error.h"

namespace pypto {

size_t grammar_draft_limit(const structured::GrammarMatcher& matcher, std::span<const int32_t> drafts) {
  if (drafts.empty()) return 0;
  structured::GrammarMatcher m = matcher;
  size_t a = 0;
  while (a < drafts.size() && m.accept(drafts[a])) ++a;
  return std::min(drafts.size(), a + 1);
}

DraftGrammarStates::DraftGrammarStates(const structured::GrammarMatcher& matcher, std::span<const int32_t> drafts)
    : num_rows_(drafts.size() + 1) {
  states_.reserve(num_rows_);
  states_.push_back(matcher);
  for (int32_t d : drafts) {
    structured::GrammarMatcher next = states_.back();
    // A broken copy (the draft is not allowed) has no state to mask the rows after it with.
    if (!next.accept(d)) break;
    states_.push_back(std::move(next));
  }
}

const structured::TokenMask* DraftGrammarStates::mask(size_t j) {
  PYPTO_ASSERT(j < num_rows_, "row ", j, " of ", num_rows_);
  if (j >= states_.size()) return nullptr;
  return states_[j].next_mask();
}

void DraftGrammarStates::compute_masks() {
  for (structured::GrammarMatcher& s : states_) s.next_mask();
}

bool DraftGrammarStates::masks_cached() const {
  for (const structured::GrammarMatcher& s : states_)
    if (!s.next_mask_is_cached()) return false;
  return true;
}

}  // namespace pypto
