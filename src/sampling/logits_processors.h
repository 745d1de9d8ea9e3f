#pragma once
// Logits processors: in-place edits of one row of logits [vocab] before sampling. Each is
// per-row, so one request using an option never changes how other rows are processed.
#include <cstdint>
#include <span>

#include "sampling/sampling_params.h"

namespace pypto {

// Adds each bias to its token's logit (OpenAI logit_bias).
void apply_logit_bias(std::span<float> logits, std::span<const LogitBias> bias);

// repetition_penalty (CTRL / Hugging Face): every token seen in the prompt or the output has its
// logit divided by the penalty when positive and multiplied when negative.
// presence_penalty / frequency_penalty (OpenAI): logit -= presence * [count > 0] + frequency *
// count, with count the token's occurrences in the output only.
void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_ids,
                     std::span<const int32_t> output_ids, float repetition_penalty,
                     float presence_penalty, float frequency_penalty);

// Sets the logits of `token_ids` to -inf (min_tokens masks eos and stop tokens this way).
void mask_tokens(std::span<float> logits, std::span<const int32_t> token_ids);

// Structured outputs: logits of tokens whose bit is clear in `allowed` (bit id % 32 of word
// id / 32, [ceil(vocab / 32)] words) become -inf. Whole words of 0 or ~0 take the fast path.
void apply_allowed_mask(std::span<float> logits, std::span<const uint32_t> allowed);

// NaN logits become -inf (never sampled, never an argmax) and +inf the largest finite float, so
// exp(x - max) stays finite for the sampler.
void sanitize_logits(std::span<float> logits);

}  // namespace pypto
