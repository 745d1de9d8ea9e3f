#pragma once
// Which of a request's verified tokens a draft model holds KV for, when it skipped a span of them
// to keep a catch-up short (issue 30 point 4, "never slower").
//
// Why: while speculation is off (the cost model's plain stretches, a throttled request's pause) a
// draft model computes nothing, so when it drafts again (a probe, 32..1024 decode steps later) it
// lacks every token since it last drafted. Catching all of them up is a prefill of that many
// tokens through the whole draft: on the seed's shapes (a 28-layer 0.6B draft for the 14B preset
// cut to 4 layers, a 44 ms step) a probe 32 tokens into a request cost ~100 ms of drafting, which
// put speculation at acceptance 0 at 0.94x plain; after 1024 steps it would be a 1024-token
// prefill. So a catch-up computes at most a fixed number of tokens: the draft keeps what it holds
// (typically the prompt, prefilled beside the target's chunks) and feeds only the last tokens
// after it, at the positions that follow, as if the skipped span had never been generated.
//
// The draft's context then has a hole for the rest of the request: drafts still see the prompt and
// the recent tokens (what a draft mostly continues or copies from), not the skipped span. The
// target verifies every draft, so outputs are unchanged (lossless); only acceptance can suffer,
// and only where a draft depended on the skipped span.
//
// The map: draft position p holds verified token p below gap_at and token p + skipped from gap_at
// on. One gap at most: a second long stretch drops the first gap's tail and skips from gap_at
// again. The draft's prefix cache only ever sees positions below gap_at (there, position = token
// index, so its block hashes hold).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

namespace pypto {

struct DraftTokenMap {
  static constexpr int64_t kNoGap = std::numeric_limits<int64_t>::max();
  int64_t gap_at = kNoGap;  // first draft position after the skipped span
  int64_t skipped = 0;      // verified tokens skipped there

  bool gapped() const { return skipped > 0; }
  // The verified token index draft position `pos` holds.
  int64_t token(int64_t pos) const { return pos < gap_at ? pos : pos + skipped; }
  // The draft position of verified token `index` (not one inside the skipped span).
  int64_t position(int64_t index) const { return index < gap_at ? index : index - skipped; }

  // The draft now holds only positions [0, held): a gap at or past `held` is gone.
  void truncate(int64_t held) {
    if (held <= gap_at) *this = DraftTokenMap{};
  }

  // Bounds the catch-up of a draft holding `held` (its tokens, position order) towards
  // `verified` tokens: when more than `max_tokens` are missing, all but the last `max_tokens` are
  // skipped (an earlier gap's tail dropped first). Returns the tokens the catch-up computes.
  int64_t bound(std::vector<int32_t>& held, int64_t verified, int64_t max_tokens) {
    int64_t missing = verified - token(int64_t(held.size()));
    if (missing <= max_tokens) return missing;
    if (gapped()) {
      held.resize(size_t(gap_at));
      *this = DraftTokenMap{};
    }
    gap_at = int64_t(held.size());
    skipped = verified - max_tokens - gap_at;
    return max_tokens;
  }
};

}  // namespace pypto
