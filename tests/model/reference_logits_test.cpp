// The engine's logits against the independent PyTorch reference (tests/reference/), on test
// checkpoints written by the project's make_test_model: prompts of 1, 7 and 300 tokens must agree
// to max|Δlogit| ≤ 1e-3 × max(1, max|logit|) with an fp32 KV cache (the bf16-KV figure is
// reported), and a 32-token greedy continuation must be identical to the reference's.
#include <gtest/gtest.h>

#include <cstdio>

#include "model/prompt_logits.h"
#include "model_harness.h"

namespace pypto::test {
namespace {

constexpr double kRelTol = 1e-3;
constexpr int kGreedyTokens = 32;

struct RefCase {
  const char* name;
  TestModelOptions opt;
  std::vector<int> prompt_lens;
  size_t greedy_prompt = 1;  // index into prompt_lens of the prompt continued greedily
};

TestModelOptions preset(const char* p, int layers) {
  TestModelOptions o;
  o.preset = p;
  if (layers > 0) o.layers = layers;
  return o;
}

void check_against_reference(const RefCase& c) {
  if (torch_python().empty()) GTEST_SKIP() << "no Python with torch and numpy (set PYPTO_PYTHON)";
  const std::string dir = ensure_test_model(c.name, c.opt);
  std::vector<std::vector<int32_t>> prompts;
  for (int len : c.prompt_lens) prompts.push_back(random_prompt(len, uint64_t(len)));
  // The reference runs before the engine stages its copy, so their peaks do not add up.
  const ReferenceRun ref = run_reference(dir, prompts, kGreedyTokens);
  auto m = load_model(dir, /*scalar=*/false);
  const int64_t V = m->model->vocab_size();

  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& p = prompts[i];
    ASSERT_EQ(ref.logits[i].rows, int64_t(p.size()));
    ASSERT_EQ(ref.logits[i].cols, V);
    for (DType kv : {DType::F32, DType::BF16}) {
      PromptLogitsOptions po;
      po.kv_dtype = kv;
      const std::vector<float> got = prompt_logits(*m->model, p, po);
      const Diff d = compare(got.data(), ref.logits[i].data.data(), got.size());
      const double bound = kRelTol * std::max(1.0, d.max_abs_ref);
      std::printf("[logits] model=%s prompt=%zu kv=%s max|dlogit|=%.3g max|logit|=%.3g (bound %.3g)\n", c.name,
                  p.size(), kv == DType::F32 ? "fp32" : "bf16", d.max_abs_diff, d.max_abs_ref, bound);
      ::testing::Test::RecordProperty(str_cat("max_dlogit_T", p.size(), kv == DType::F32 ? "_fp32kv" : "_bf16kv"),
                     str_cat(d.max_abs_diff));
      if (kv == DType::F32)
        EXPECT_LE(d.max_abs_diff, bound) << c.name << " prompt of " << p.size() << " tokens, fp32 KV";
    }
  }

  const auto& gp = prompts[c.greedy_prompt];
  const std::vector<int32_t> got = engine_greedy(*m->model, gp, kGreedyTokens, DType::F32);
  EXPECT_EQ(join_ids(got), join_ids(ref.greedy[c.greedy_prompt]))
      << c.name << ": greedy continuation of the " << gp.size() << "-token prompt differs (fp32 KV)";
  const std::vector<int32_t> got_bf16 = engine_greedy(*m->model, gp, kGreedyTokens, DType::BF16);
  size_t same = 0;
  while (same < got_bf16.size() && got_bf16[same] == ref.greedy[c.greedy_prompt][same]) ++same;
  std::printf("[greedy] model=%s prompt=%zu fp32-KV identical=%d bf16-KV first %zu/%d tokens identical\n", c.name,
              gp.size(), int(got == ref.greedy[c.greedy_prompt]), same, kGreedyTokens);
}

TEST(ReferenceLogits, Tiny) { check_against_reference({"tiny", preset("tiny", 0), {1, 7, 300}}); }

TEST(ReferenceLogits, TinyQwen2) {
  TestModelOptions o = preset("tiny", 0);
  o.qwen2 = true;
  check_against_reference({"tiny-qwen2", o, {1, 7, 300}});
}

TEST(ReferenceLogits, Qwen3_0_6B_2Layers) {
  check_against_reference({"qwen3-0.6b-2l", preset("qwen3-0.6b", 2), {1, 7, 300}});
}

TEST(ReferenceLogits, Qwen3_0_6B_NoQkNorm) {
  TestModelOptions o = preset("qwen3-0.6b", 2);
  o.qk_norm = false;
  o.seed = 1;
  check_against_reference({"qwen3-0.6b-2l-noqknorm", o, {1, 7, 300}});
}

TEST(ReferenceLogits, Qwen3_0_6B_F16Sharded) {
  TestModelOptions o = preset("qwen3-0.6b", 2);
  o.dtype = DType::F16;
  o.shards = 2;
  o.seed = 2;
  check_against_reference({"qwen3-0.6b-2l-f16-2shards", o, {1, 7, 300}});
}

// The 14B shape (hidden 5120, 40/8 heads, intermediate 17408, untied 151936-row lm_head):
// ~4 GB of bf16 weights even with 2 layers, so it is the most expensive case here.
TEST(ReferenceLogits, Qwen3_14B_2Layers) {
  check_against_reference({"qwen3-14b-2l", preset("qwen3-14b", 2), {1, 7, 300}});
}

}  // namespace
}  // namespace pypto::test
