#include "sampling/sampling_params.h"

#include <cmath>

#include "core/error.h"

namespace pypto {

namespace {

[[noreturn]] void out_of_range(const char* field, const std::string& value, const char* allowed) {
  fail("sampling parameter '", field, "' = ", value, " is out of range: allowed ", allowed);
}

std::string num(double v) { return str_cat(v); }

void check_token(const char* field, int32_t id, std::optional<int64_t> vocab_size) {
  if (id < 0) fail("sampling parameter '", field, "' has token id ", id, ": allowed 0 <= id");
  if (vocab_size && id >= *vocab_size)
    fail("sampling parameter '", field, "' has token id ", id, ": allowed 0 <= id < vocab size ",
         *vocab_size);
}

}  // namespace

void SamplingParams::validate(std::optional<int64_t> vocab_size) const {
  if (max_tokens < 1) out_of_range("max_tokens", num(max_tokens), ">= 1");
  if (min_tokens < 0) out_of_range("min_tokens", num(min_tokens), ">= 0");
  if (min_tokens > max_tokens)
    fail("sampling parameter 'min_tokens' = ", min_tokens, " exceeds 'max_tokens' = ", max_tokens,
         ": allowed 0 <= min_tokens <= max_tokens");
  if (n < 1 || n > kMaxN) out_of_range("n", num(n), str_cat("1 <= n <= ", kMaxN).c_str());
  if (!std::isfinite(temperature) || temperature < 0.0f)
    out_of_range("temperature", num(temperature), ">= 0 (0 = greedy)");
  if (top_k && *top_k < 1) out_of_range("top_k", num(*top_k), ">= 1 (omit to disable)");
  if (!(top_p > 0.0f && top_p <= 1.0f)) out_of_range("top_p", num(top_p), "0 < top_p <= 1");
  if (!(min_p >= 0.0f && min_p <= 1.0f)) out_of_range("min_p", num(min_p), "0 <= min_p <= 1");
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty)))
    out_of_range("repetition_penalty", num(repetition_penalty), "> 0 (1 = off)");
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    out_of_range("presence_penalty", num(presence_penalty), "-2 <= presence_penalty <= 2");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    out_of_range("frequency_penalty", num(frequency_penalty), "-2 <= frequency_penalty <= 2");
  for (const LogitBias& b : logit_bias) {
    check_token("logit_bias", b.token_id, vocab_size);
    if (!(b.bias >= -kMaxLogitBias && b.bias <= kMaxLogitBias))
      fail("sampling parameter 'logit_bias' for token ", b.token_id, " = ", b.bias,
           " is out of range: allowed -100 <= bias <= 100");
  }
  for (int32_t id : stop_token_ids) check_token("stop_token_ids", id, vocab_size);
  for (size_t i = 0; i < stop.size(); ++i)
    if (stop[i].empty()) fail("sampling parameter 'stop' entry ", i, " is empty: stop strings must be non-empty");
  if (logprobs && (*logprobs < 0 || *logprobs > kMaxTopLogprobs))
    out_of_range("logprobs", num(*logprobs), "0 <= logprobs <= 20");
}

}  // namespace pypto
