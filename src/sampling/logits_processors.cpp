#include "sampling/logits_processors.h"

#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/error.h"

namespace pypto {

void apply_logit_bias(std::span<float> logits, std::span<const LogitBias> bias) {
  for (const LogitBias& b : bias) {
    PYPTO_ASSERT(b.token_id >= 0 && size_t(b.token_id) < logits.size(), "logit_bias token ", b.token_id);
    logits[b.token_id] += b.bias;
  }
}

void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt_ids,
                     std::span<const int32_t> output_ids, float repetition_penalty,
                     float presence_penalty, float frequency_penalty) {
  const size_t vocab = logits.size();
  auto in_vocab = [vocab](int32_t t) { return t >= 0 && size_t(t) < vocab; };
  if (repetition_penalty != 1.0f) {
    // Each distinct token is penalised once, however often it occurs.
    std::unordered_map<int32_t, bool> seen;
    seen.reserve(prompt_ids.size() + output_ids.size());
    auto penalise = [&](int32_t t) {
      if (!in_vocab(t) || !seen.emplace(t, true).second) return;
      float& x = logits[t];
      x = x > 0.0f ? x / repetition_penalty : x * repetition_penalty;
    };
    for (int32_t t : prompt_ids) penalise(t);
    for (int32_t t : output_ids) penalise(t);
  }
  if (presence_penalty != 0.0f || frequency_penalty != 0.0f) {
    std::unordered_map<int32_t, int32_t> counts;
    counts.reserve(output_ids.size());
    for (int32_t t : output_ids)
      if (in_vocab(t)) ++counts[t];
    for (const auto& [t, c] : counts) logits[t] -= presence_penalty + frequency_penalty * float(c);
  }
}

void mask_tokens(std::span<float> logits, std::span<const int32_t> token_ids) {
  for (int32_t t : token_ids)
    if (t >= 0 && size_t(t) < logits.size()) logits[t] = -std::numeric_limits<float>::infinity();
}

void sanitize_logits(std::span<float> logits) {
  for (float& x : logits) {
    if (std::isnan(x)) x = -std::numeric_limits<float>::infinity();
    else if (x == std::numeric_limits<float>::infinity()) x = std::numeric_limits<float>::max();
  }
}

}  // namespace pypto
