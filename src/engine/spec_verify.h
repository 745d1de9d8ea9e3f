#pragma once
// Verifying drafts by sampling the target (the rule the engine applies to a request's 1 + k rows).
//
// Row j of a request that verifies drafts d[0..k) holds the target's logits after its last
// accepted token and d[0..j). The engine samples row j exactly as plain decoding samples the
// request's next token: penalties and min_tokens over prompt + output + d[0..j), and the draw
// u = philox(seed, output length + j) (sampling/sampler.h). Draft j is accepted while it equals
// row j's token; at the first mismatch row j's token is the target's own and the run ends; if all
// k are accepted, row k's token follows them (the bonus). So:
//  - greedy: accept while the draft equals the argmax (vLLM's greedy rule);
//  - sampling: every emitted token is the token plain decoding draws at that position from the
//    same prefix, so the output equals the run without speculation token for token (same seed)
//    and follows the target's distribution exactly. A draft is accepted with probability p(d),
//    which for a one-hot draft distribution (n-gram) is also rejection sampling's acceptance.
#include <cstddef>
#include <cstdint>
#include <span>

#include "sampling/sampler.h"

namespace pypto {

// Number of leading drafts accepted: the largest a <= drafts.size() with rows[j].token_id ==
// drafts[j] for all j < a. rows has drafts.size() + 1 entries; the verified run is rows[0..a].
size_t accepted_prefix(std::span<const SampledToken> rows, std::span<const int32_t> drafts);

}  // namespace pypto
