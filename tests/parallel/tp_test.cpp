// Tensor parallelism against a single rank: TP=2 logits of every prompt row (vocab-parallel
// lm_head, gathered onto rank 0) equal TP=1 logits within the reference tolerance
// (max|Δ| ≤ 1e-3 · max(1, max|logit|)), greedy continuations through the TpModelRunner are
// identical, each rank holds its contiguous vocabulary slice, and each rank's staged slab is at
// most 0.55 × the TP=1 slab (layers, embedding and lm_head are all split; only norms are whole).
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

void check_tp2(const std::string& name, const TestModelOptions& opt, int prompt_len) {
  const std::string dir = ensure_test_model(name, opt);
  const std::vector<int32_t> prompt = random_prompt(prompt_len, 11);
  std::vector<float> ref;
  std::vector<int32_t> ref_greedy;
  size_t full_bytes = 0;
  {
    auto one = stage_slices(dir, 1);
    full_bytes = one[0]->resident_bytes;
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

  // Vocabulary slices: contiguous, in rank order, covering the vocabulary once.
  const int64_t V = two[0]->config.vocab_size;
  EXPECT_EQ(two[0]->vocab_begin, 0);
  EXPECT_EQ(two[0]->vocab_begin + two[0]->vocab_rows, two[1]->vocab_begin);
  EXPECT_EQ(two[1]->vocab_begin + two[1]->vocab_rows, V);
  EXPECT_EQ(two[0]->lm_head.n_out, two[0]->vocab_rows);

  // Memory: everything large is split (only the norms are whole), so a rank holds about half.
  size_t sum = 0;
  for (int r = 0; r < 2; ++r) {
    const size_t b = two[size_t(r)]->resident_bytes;
    sum += b;
    std::printf("[tp] %s: rank %d holds %.1f MiB of %.1f MiB (%.1f%%)\n", name.c_str(), r, b / 1048576.0,
                full_bytes / 1048576.0, 100.0 * b / full_bytes);
    EXPECT_LE(double(b), 0.55 * double(full_bytes)) << name << " rank " << r;
    EXPECT_GE(double(b), 0.45 * double(full_bytes)) << name << " rank " << r;
  }
  // Nothing is lost or duplicated beyond the replicated norms and per-tensor alignment.
  EXPECT_LE(sum, full_bytes + full_bytes / 50 + (1 << 20)) << name;
  EXPECT_GE(sum, full_bytes) << name;
  EXPECT_EQ(two[0]->n_kv_heads * 2, int(two[0]->config.num_key_value_heads));
}

TEST(TensorParallel, Tiny) { check_tp2("tiny", preset("tiny", std::nullopt), 37); }

TEST(TensorParallel, Qwen3_0_6B_2Layers) { check_tp2("qwen3-0.6b-2l", preset("qwen3-0.6b", 2), 21); }

// hidden 5120, 40/8 heads, intermediate 17408, untied lm_head: ~4 GB of bf16 even with 2 layers.
// Stages 4.2 GB (TP=1) then 2 x 3.6 GB (TP=2): minutes on a 2-core machine, so opt-in
// (PYPTO_LARGE_TESTS=1) to keep CI short. Measured: max|dlogit| 1.1e-05, 50.0% per rank
// (85.1% with the replicated embedding and lm_head of before).
TEST(TensorParallel, Qwen3_14B_2Layers) {
  const char* on = std::getenv("PYPTO_LARGE_TESTS");
  if (!on || std::string(on) != "1") GTEST_SKIP() << "set PYPTO_LARGE_TESTS=1 (stages ~11 GB, minutes)";
  check_tp2("qwen3-14b-2l", preset("qwen3-14b", 2), 9);
}

TEST(TensorParallel, VocabSlicesAreContiguousAndBalanced) {
  // 10 rows over 3 ranks: [0, 3), [3, 6), [6, 10); sizes differ by at most one.
  const int64_t begins[] = {0, 3, 6}, ends[] = {3, 6, 10};
  for (int r = 0; r < 3; ++r) {
    const VocabSlice s = vocab_slice(10, 3, r);
    EXPECT_EQ(s.begin, begins[r]) << r;
    EXPECT_EQ(s.end, ends[r]) << r;
  }
  EXPECT_EQ(vocab_slice(151936, 2, 1).begin, 75968);
  EXPECT_EQ(vocab_slice(151936, 1, 0).end, 151936);
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

// A step that throws (a token id outside the vocabulary) fails that step only: the next good step
// runs, on one rank as on two (a rank's error is cleared before every step).
TEST(TensorParallel, AFailedStepDoesNotFailTheNext) {
  const std::string dir = ensure_test_model("tiny", preset("tiny", std::nullopt));
  for (int tp : {1, 2}) {
    auto runner = make_tp_runner(stage_slices(dir, tp), 16);
    auto step = [&](int32_t token) {
      SchedulerOutput so;
      ScheduledRequest s;
      s.req_id = "r";
      s.num_scheduled_tokens = 2;
      s.token_ids = {5, token};
      s.is_new = true;
      s.block_ids = {0};
      s.samples = true;
      so.total_num_scheduled_tokens = 2;
      so.scheduled.push_back(s);
      ExecutorOutput eo;
      runner->execute(so, eo);
      return eo.logits.size();
    };
    EXPECT_THROW(step(1 << 30), Error) << "tp " << tp;
    EXPECT_GT(step(7), 0u) << "tp " << tp;
  }
}

}  // namespace
}  // namespace pypto::test
