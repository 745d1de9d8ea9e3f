#include <gtest/gtest.h>

#include "core/error.h"
#include "sampling/sampling_params.h"

namespace pypto {
namespace {

std::string error_of(const SamplingParams& p, std::optional<int64_t> vocab = std::nullopt) {
  try {
    p.validate(vocab);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplingParams, DefaultsAreValid) {
  SamplingParams p;
  EXPECT_EQ(error_of(p), "");
  EXPECT_FALSE(p.is_greedy());
  p.temperature = 0.0f;
  EXPECT_TRUE(p.is_greedy());
}

TEST(SamplingParams, ErrorsNameFieldValueAndRange) {
  SamplingParams p;
  p.top_p = 1.5f;
  EXPECT_EQ(error_of(p), "sampling parameter 'top_p' = 1.5 is out of range: allowed 0 < top_p <= 1");
  p = {};
  p.temperature = -1.0f;
  EXPECT_EQ(error_of(p), "sampling parameter 'temperature' = -1 is out of range: allowed >= 0 (0 = greedy)");
  p = {};
  p.max_tokens = 0;
  EXPECT_EQ(error_of(p), "sampling parameter 'max_tokens' = 0 is out of range: allowed >= 1");
  p = {};
  p.top_k = 0;
  EXPECT_EQ(error_of(p), "sampling parameter 'top_k' = 0 is out of range: allowed >= 1 (omit to disable)");
  p = {};
  p.min_p = -0.1f;
  EXPECT_EQ(error_of(p), "sampling parameter 'min_p' = -0.1 is out of range: allowed 0 <= min_p <= 1");
  p = {};
  p.presence_penalty = 2.5f;
  EXPECT_EQ(error_of(p), "sampling parameter 'presence_penalty' = 2.5 is out of range: allowed -2 <= presence_penalty <= 2");
  p = {};
  p.frequency_penalty = -3.0f;
  EXPECT_EQ(error_of(p), "sampling parameter 'frequency_penalty' = -3 is out of range: allowed -2 <= frequency_penalty <= 2");
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_EQ(error_of(p), "sampling parameter 'repetition_penalty' = 0 is out of range: allowed > 0 (1 = off)");
  p = {};
  p.n = 0;
  EXPECT_EQ(error_of(p), "sampling parameter 'n' = 0 is out of range: allowed 1 <= n <= 128");
  p = {};
  p.logprobs = 21;
  EXPECT_EQ(error_of(p), "sampling parameter 'logprobs' = 21 is out of range: allowed 0 <= logprobs <= 20");
  p = {};
  p.min_tokens = 300;
  EXPECT_EQ(error_of(p), "sampling parameter 'min_tokens' = 300 exceeds 'max_tokens' = 256: allowed 0 <= min_tokens <= max_tokens");
  p = {};
  p.stop = {"a", ""};
  EXPECT_EQ(error_of(p), "sampling parameter 'stop' entry 1 is empty: stop strings must be non-empty");
}

TEST(SamplingParams, TokenIdsCheckedAgainstVocab) {
  SamplingParams p;
  p.logit_bias = {{5, 1.0f}};
  EXPECT_EQ(error_of(p, 10), "");
  EXPECT_EQ(error_of(p, 5), "sampling parameter 'logit_bias' has token id 5: allowed 0 <= id < vocab size 5");
  p.logit_bias = {{1, 101.0f}};
  EXPECT_EQ(error_of(p), "sampling parameter 'logit_bias' for token 1 = 101 is out of range: allowed -100 <= bias <= 100");
  p = {};
  p.stop_token_ids = {-1};
  EXPECT_EQ(error_of(p), "sampling parameter 'stop_token_ids' has token id -1: allowed 0 <= id");
}

}  // namespace
}  // namespace pypto
