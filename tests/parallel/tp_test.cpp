// Tensor parallelism against a single rank: TP=2 logits of every prompt row equal TP=1 logits
// within the reference tolerance (max|Δ| ≤ 1e-3 · max(1, max|logit|)), every rank ends with
// bitwise the same logits, greedy continuations through the TpModelRunner are identical, and
// each rank's staged slab holds its share of the layers plus the replicated embedding/lm_head.
// (The single-rank path itself is checked against PyTorch in tests/model.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "io/checkpoint.h"
#include "model/model_harness.h"
#include "model/weight_staging.h"
#include "tp_harness.h"

namespace pypto::test {
namespace {

TestModelOptions preset(const std::string& name, std::optional<int> layers) {
  TestModelOptions o;
  o.preset = name;
  o.layers = layers;
  return o;
}

// Bytes of a slice that every rank holds whole: embedding, lm_head (unless it shares the
// embedding), final norm; the rest (layers) is split.
size_t replicated_bytes(const Qwen3Weights& w) {
  const ModelConfig& c = w.config;
  const size_t embed = size_t(c.vocab_size) * size_t(c.hidden_size) * dtype_size(w.embed_dtype);
  const bool shared = w.lm_head.data == w.embed;
  return embed + (shared ? 0 : embed);
}

void check_tp2(const std::string& name, const TestModelOptions& opt, int prompt_len) {
  const std::string dir = ensure_test_model(name, opt);
  const std::vector<int32_t> prompt = random_prompt(prompt_len, 11);
  std::vector<float> ref;
  std::vector<int32_t> ref_greedy;
  size_t full_bytes = 0, replicated = 0;
  {
    auto one = stage_slices(dir, 1);
    full_bytes = one[0]->resident_bytes;
    replicated = replicated_bytes(*one[0]);
    ref = tp_prompt_logits(one, prompt);
    auto runner = make_tp_runner(one, 64);
    ref_greedy = tp_greedy(*runner, prompt, 6);
  }  // TP=1 weights freed before TP=2 is staged (the 14B shape is large)
  auto two = stage_slices(dir, 2);
  const std::vector<float> got = tp_prompt_logits(two, prompt);
  ASSERT_EQ(got.size(), ref.size());
  const Diff d = compare(got.data(), ref.data(), ref.size());
  const double tol = 1e-3 * std::max(1.0, d.max_abs_ref);
  std::printf("[tp] %s: %d rows, TP=2 vs TP=1 max|dlogit| %.3g (max|logit| %.3g, tolerance %.3g)\n", name.c_str(),
              prompt_len, d.max_abs_diff, d.max_abs_ref, tol);
  EXPECT_LE(d.max_abs_diff, tol) << name;

  auto runner = make_tp_runner(two, 64);
  EXPECT_EQ(tp_greedy(*runner, prompt, 6), ref_greedy) << name;

  // Memory: each rank holds the replicated tensors plus half of the rest.
  const size_t split = full_bytes - replicated;
  for (int r = 0; r < 2; ++r) {
    const size_t b = two[size_t(r)]->resident_bytes;
    std::printf("[tp] %s: rank %d holds %.1f MiB of %.1f MiB (%.1f%%; layers %.1f%% of theirs)\n", name.c_str(), r,
                b / 1048576.0, full_bytes / 1048576.0, 100.0 * b / full_bytes,
                100.0 * double(b - replicated) / double(split));
    EXPECT_LE(b, replicated + split / 2 + split / 50 + (1 << 20)) << name << " rank " << r;
    EXPECT_GE(b, replicated + split / 2 - split / 50) << name << " rank " << r;
  }
  EXPECT_EQ(two[0]->n_kv_heads * 2, int(two[0]->config.num_key_value_heads));
}

TEST(TensorParallel, Tiny) { check_tp2("tiny", preset("tiny", std::nullopt), 37); }

TEST(TensorParallel, Qwen3_0_6B_2Layers) { check_tp2("qwen3-0.6b-2l", preset("qwen3-0.6b", 2), 21); }

// hidden 5120, 40/8 heads, intermediate 17408, untied lm_head: ~4 GB of bf16 even with 2 layers.
// Stages 4.2 GB (TP=1) then 2 x 3.6 GB (TP=2): minutes on a 2-core machine, so opt-in
// (PYPTO_LARGE_TESTS=1) to keep CI short. Measured: max|dlogit| 1.1e-05, 85.1% per rank.
TEST(TensorParallel, Qwen3_14B_2Layers) {
  const char* on = std::getenv("PYPTO_LARGE_TESTS");
  if (!on || std::string(on) != "1") GTEST_SKIP() << "set PYPTO_LARGE_TESTS=1 (stages ~11 GB, minutes)";
  check_tp2("qwen3-14b-2l", preset("qwen3-14b", 2), 9);
}

TEST(TensorParallel, KvHeadsMustDivide) {
  const std::string dir = ensure_test_model("tiny", preset("tiny", std::nullopt));
  auto ck = Checkpoint::open(dir);
  const int kv = ck->config().num_key_value_heads;
  auto backend = make_cpu_backend(1);
  StagingOptions so;
  so.tp_size = kv + 1;  // never divides the KV heads (nor, for tiny, the query heads)
  so.show_progress = false;
  EXPECT_THROW(stage_qwen3_weights(*ck, *backend, so), Error);
}

}  // namespace
}  // namespace pypto::test
