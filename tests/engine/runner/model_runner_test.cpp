// The engine over the real Qwen3 forward pass (tiny random-weight checkpoint, CPU kernels):
// greedy tokens of a prompt are the same alone, in a batch of 16 mixed-length prompts, with
// prompts chunked by --long-prefill-token-threshold 7, with prefix caching on (second pass hits)
// or off, and through preemption in a KV pool of a few blocks.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "model_harness.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int kNewTokens = 8;
constexpr int32_t kBlockSize = 16;

test::LoadedModel& tiny_model() {
  static std::unique_ptr<test::LoadedModel> m =
      test::load_model(test::ensure_test_model("tiny", TestModelOptions{}), /*scalar=*/false);
  return *m;
}

struct RunnerSetup {
  int32_t num_blocks = 64;
  int64_t threshold = 2048;
  int64_t budget = 4096;
  bool prefix_caching = true;
};

struct ModelEngine {
  explicit ModelEngine(const RunnerSetup& s) {
    Qwen3Model& model = *tiny_model().model;
    cache = std::make_unique<KvCache>(model.kv_cache_spec(s.num_blocks, kBlockSize, DType::BF16));
    EngineConfig c;
    c.scheduler.max_num_batched_tokens = s.budget;
    c.scheduler.long_prefill_token_threshold = s.threshold;
    c.scheduler.max_model_len = 256;
    c.cache.block_size = kBlockSize;
    c.cache.num_blocks = s.num_blocks;
    c.cache.enable_prefix_caching = s.prefix_caching;
    c.vocab_size = model.vocab_size();
    engine = std::make_unique<Engine>(c, std::make_unique<ModelRunner>(model, *cache));
  }

  // Greedy unless `sampling` is given (then prompt i uses it with seed 1000 + i).
  std::map<std::string, Ids> run(const std::vector<Ids>& prompts, const std::string& tag = "p",
                                 const SamplingParams* sampling = nullptr) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      EngineRequest r;
      r.request_id = tag + std::to_string(i);
      r.prompt_token_ids = prompts[i];
      if (sampling) {
        r.params = *sampling;
        r.params.seed = 1000 + i;
      } else {
        r.params.temperature = 0.0f;
      }
      r.params.max_tokens = kNewTokens;
      r.params.ignore_eos = true;
      engine->add_request(r);
    }
    std::map<std::string, Ids> out;
    for (int step = 0; step < 10000 && engine->has_unfinished_requests(); ++step)
      for (const RequestOutput& o : engine->step()) {
        EXPECT_NE(o.finish_reason, FinishReason::Error) << o.error;
        Ids& t = out[o.request_id];
        t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      }
    return out;
  }

  std::unique_ptr<KvCache> cache;
  std::unique_ptr<Engine> engine;
};

std::vector<Ids> mixed_prompts(int n, const Ids& prefix = {}) {
  std::vector<Ids> out;
  for (int i = 0; i < n; ++i) {
    Ids p = prefix;
    const Ids tail = test::random_prompt(3 + (i * 11) % 60, uint64_t(100 + i));
    p.insert(p.end(), tail.begin(), tail.end());
    out.push_back(p);
  }
  return out;
}

// Each prompt's tokens when it runs alone through its own engine.
std::vector<Ids> alone(const std::vector<Ids>& prompts) {
  std::vector<Ids> out;
  for (const Ids& p : prompts) out.push_back(ModelEngine(RunnerSetup{}).run({p})["p0"]);
  return out;
}

void expect_same(const std::map<std::string, Ids>& got, const std::vector<Ids>& want, const std::string& tag = "p") {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_EQ(got.at(tag + std::to_string(i)), want[i]) << "prompt " << i;
}

TEST(ModelRunner, AloneMatchesTheModelsGreedyDecode) {
  const Ids prompt = test::random_prompt(37, 5);
  const Ids want = test::engine_greedy(*tiny_model().model, prompt, kNewTokens, DType::BF16);
  EXPECT_EQ(ModelEngine(RunnerSetup{}).run({prompt})["p0"], want);
}

TEST(ModelRunner, BatchOfSixteenMixedLengthsMatchesAlone) {
  const auto prompts = mixed_prompts(16);
  const auto want = alone(prompts);
  expect_same(ModelEngine(RunnerSetup{}).run(prompts), want);
}

TEST(ModelRunner, ChunkedPrefillThresholdSevenMatchesAlone) {
  const auto prompts = mixed_prompts(16);
  const auto want = alone(prompts);
  RunnerSetup s;
  s.threshold = 7;
  expect_same(ModelEngine(s).run(prompts), want);
}

TEST(ModelRunner, PrefixCachingOnAndOffMatchAlone) {
  const auto prompts = mixed_prompts(8, test::random_prompt(40, 77));
  const auto want = alone(prompts);
  RunnerSetup big;
  big.num_blocks = 256;  // room for both passes: nothing of the first is evicted by the second
  ModelEngine on(big);
  expect_same(on.run(prompts, "a"), want, "a");
  // All eight are admitted in the first step, before any block is published: no hits yet.
  const int64_t hits_first = on.engine->scheduler().kv_cache_manager().prefix_cache_stats().hit_tokens;
  EXPECT_EQ(hits_first, 0);
  expect_same(on.run(prompts, "b"), want, "b");
  // The second pass finds every full prompt block (all but the last token) of the first.
  const int64_t hits_second = on.engine->scheduler().kv_cache_manager().prefix_cache_stats().hit_tokens;
  int64_t full_blocks = 0;
  for (const Ids& p : prompts) full_blocks += int64_t(p.size() - 1) / kBlockSize;
  EXPECT_EQ(hits_second, full_blocks * kBlockSize);

  RunnerSetup off_setup;
  off_setup.prefix_caching = false;
  ModelEngine off(off_setup);
  expect_same(off.run(prompts), want);
  EXPECT_EQ(off.engine->scheduler().kv_cache_manager().prefix_cache_stats().hit_tokens, 0);
}

TEST(ModelRunner, SeededSamplingReproducesAloneAndInABatch) {
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.95f;
  p.top_k = 40;
  const auto prompts = mixed_prompts(6);
  std::vector<Ids> want;
  for (size_t i = 0; i < prompts.size(); ++i) {
    // Alone, with the seed it has in the batch (1000 + i).
    SamplingParams q = p;
    ModelEngine e(RunnerSetup{});
    EngineRequest r;
    r.request_id = "x";
    r.prompt_token_ids = prompts[i];
    r.params = q;
    r.params.seed = 1000 + i;
    r.params.max_tokens = kNewTokens;
    r.params.ignore_eos = true;
    e.engine->add_request(r);
    Ids got;
    while (e.engine->has_unfinished_requests())
      for (const RequestOutput& o : e.engine->step()) got.insert(got.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    want.push_back(got);
  }
  RunnerSetup chunked;
  chunked.threshold = 7;
  expect_same(ModelEngine(chunked).run(prompts, "p", &p), want);
  expect_same(ModelEngine(RunnerSetup{}).run(prompts, "p", &p), want);
}

TEST(ModelRunner, PreemptionInATinyPoolMatchesAlone) {
  const auto prompts = mixed_prompts(16);
  const auto want = alone(prompts);
  RunnerSetup s;
  s.num_blocks = 8;  // 128 tokens for 16 requests of up to 70 tokens each
  s.threshold = 32;
  ModelEngine e(s);
  expect_same(e.run(prompts), want);
  EXPECT_GT(e.engine->scheduler().num_preemptions(), 0);
}

}  // namespace
}  // namespace pypto
