#pragma once
// Per-request sampling parameters (OpenAI / vLLM meanings) and their validation.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pypto {

// A temperature at or below this samples greedily (argmax, ties -> lowest token id).
inline constexpr float kGreedyTemperature = 1e-5f;
// Largest number of alternatives a request may ask for per position (OpenAI's limit).
inline constexpr int32_t kMaxTopLogprobs = 20;
// Largest n (parallel samples of one prompt).
inline constexpr int32_t kMaxN = 128;
// logit_bias values are clamped by OpenAI to this range; we reject values outside it.
inline constexpr float kMaxLogitBias = 100.0f;

struct LogitBias {
  int32_t token_id = 0;
  float bias = 0.0f;
};

struct SamplingParams {
  int32_t max_tokens = 256;  // generated tokens at most (the seed's max_new_tokens default)
  int32_t min_tokens = 0;    // eos and stop_token_ids are masked until this many were generated
  int32_t n = 1;             // independent samples of the same prompt

  float temperature = 1.0f;  // <= kGreedyTemperature -> greedy
  std::optional<int32_t> top_k;  // keep the k most likely tokens; absent = all
  float top_p = 1.0f;            // nucleus: smallest prefix of mass >= top_p (keeps the token crossing p)
  float min_p = 0.0f;            // drop tokens with p < min_p * p_max
  std::optional<uint64_t> seed;  // absent: the engine draws one at add_request

  // Penalties: repetition (HF/CTRL style, prompt + output tokens), presence and frequency
  // (OpenAI style, output tokens only).
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<LogitBias> logit_bias;

  std::vector<std::string> stop;        // stop strings, trimmed from the text (OpenAI)
  std::vector<int32_t> stop_token_ids;  // stop tokens (kept in token ids, not in text)
  bool ignore_eos = false;

  // Logprob of each sampled token plus this many most likely alternatives; absent = none.
  std::optional<int32_t> logprobs;

  bool is_greedy() const { return temperature <= kGreedyTemperature; }

  // Throws Error naming the field, its value and the allowed range. vocab_size, when given,
  // also bounds logit_bias and stop_token_ids token ids.
  void validate(std::optional<int64_t> vocab_size = std::nullopt) const;
};

}  // namespace pypto
