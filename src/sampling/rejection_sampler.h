#pragma once
// Rejection sampling for speculative decoding with a draft distribution (Leviathan et al. 2023,
// Chen et al. 2023): the tokens it emits follow the target's distribution exactly, whatever the
// draft proposed.
//
// A request verifies k drafts x[0..k) that the draft model sampled from q[j] (its processed
// distribution at position j). Row j of the target's logits gives p[j] after the same
// processing (sampler.h's sampling_distribution: penalties over output + x[0..j), temperature,
// top-k, top-p, min-p). For j = 0, 1, ...:
//   accept x[j] when u_j < p[j](x[j]) / q[j](x[j])          (probability min(1, p/q));
//   on the first rejection emit r ~ norm(max(0, p[j] - q[j])) and stop;
//   if all k are accepted, emit the bonus token from p[k] (the ordinary sampler on row k).
// Greedy requests never come here: their drafts are the draft's argmax and the target's argmax
// decides (engine/spec_verify.h), which is this rule with one-hot p and q.
//
// Draws are Philox streams of the request's seed, keyed by the output position and a stream tag
// (accept, residual; the draft model's own draws use kDraftStream), so a seeded request is
// reproducible run to run. They differ from plain decoding's draws, so a seeded request's text
// differs from the one without speculation (its distribution does not), as in vLLM.
#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampler.h"

namespace pypto {

// Stream tags in the top bits of the Philox draw number (plain decoding uses the bare position).
constexpr uint64_t kDraftStream = uint64_t(1) << 62;
constexpr uint64_t kAcceptStream = uint64_t(2) << 62;
constexpr uint64_t kResidualStream = uint64_t(3) << 62;

// One position's test. p, q: [vocab] distributions; x: the draft token; u_accept, u_residual
// uniform in [0, 1). Returns x when accepted, else a draw from norm(max(0, p - q)) (from p when
// that residual is empty, which needs p == q up to rounding, where rejection has probability ~0).
struct RejectionStep {
  bool accepted = false;
  int32_t token_id = 0;
};
RejectionStep rejection_step(std::span<const float> p, std::span<const float> q, int32_t x, double u_accept,
                             double u_residual);

// Verifies one request's drafts. logits: the target's [k + 1, vocab] rows (modified in place);
// drafts: x[0..k); draft_probs: [k, vocab] (q); rows: k + 1 sampler rows, row j with output
// history = output + x[0..j) (its size gives the position of row j's token). Returns the
// emitted run, 1 .. k + 1 tokens: the accepted drafts then a residual or bonus token, with
// logprobs (of the raw target rows) when the request asks for them.
std::vector<SampledToken> rejection_sample(std::span<float> logits, int64_t vocab, std::span<const int32_t> drafts,
                                           std::span<const float> draft_probs, std::span<const SamplerRow> rows);

}  // namespace pypto
