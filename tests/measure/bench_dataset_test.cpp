// The random dataset: prompts encode to exactly the requested number of tokens with the real
// Qwen3 tokenizer, deterministically per seed.
#include <gtest/gtest.h>

#include "cli/bench_dataset.h"
#include "model/test_model.h"

namespace pypto::bench {
namespace {

std::shared_ptr<const Tokenizer> qwen3() {
  static auto tok = Tokenizer::load(qwen3_tokenizer_dir());
  return tok;
}

TEST(RandomDataset, PromptsHaveExactlyTheInputLength) {
  for (int64_t n : {1, 2, 7, 64, 257}) {
    RandomDatasetOptions o{n, 5, 0.0, 6, uint64_t(n)};
    auto data = random_dataset(*qwen3(), o);
    ASSERT_EQ(data.size(), 6u);
    for (const DatasetRequest& r : data) {
      EXPECT_EQ(int64_t(r.prompt_ids.size()), n);
      EXPECT_EQ(qwen3()->encode(r.prompt), r.prompt_ids);  // what the server will see
      EXPECT_EQ(r.output_len, 5);
    }
  }
}

TEST(RandomDataset, DeterministicPerSeed) {
  RandomDatasetOptions o{32, 8, 0.0, 3, 11};
  auto a = random_dataset(*qwen3(), o), b = random_dataset(*qwen3(), o);
  o.seed = 12;
  auto c = random_dataset(*qwen3(), o);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].prompt, b[i].prompt);
  EXPECT_NE(a[0].prompt, c[0].prompt);
}

TEST(RandomDataset, RangeRatioBoundsLengths) {
  RandomDatasetOptions o{40, 20, 0.5, 30, 3};
  bool varied = false;
  for (const DatasetRequest& r : random_dataset(*qwen3(), o)) {
    EXPECT_GE(r.prompt_ids.size(), 20u);
    EXPECT_LE(r.prompt_ids.size(), 60u);
    EXPECT_GE(r.output_len, 10);
    EXPECT_LE(r.output_len, 30);
    varied |= r.prompt_ids.size() != 40u;
  }
  EXPECT_TRUE(varied);
}

TEST(RandomDataset, RejectsBadLengths) {
  EXPECT_THROW(random_dataset(*qwen3(), {0, 5, 0.0, 1, 0}), Error);
  EXPECT_THROW(random_dataset(*qwen3(), {5, 5, 1.5, 1, 0}), Error);
}

}  // namespace
}  // namespace pypto::bench
