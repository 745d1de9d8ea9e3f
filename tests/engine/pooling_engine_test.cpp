// Pooling requests in the engine (engine/engine_pooling.cpp): prefill-only work in the same
// scheduler. A stand-in pooling executor returns for each output row the FakeModel's prediction
// from the row's whole context (read back through the KV cache), so a row that saw a wrong block,
// a stale prefix hit or a cut chunk gives a different value.
#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "engine/engine.h"
#include "fake_model.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
using testing::FakeModel;

constexpr int32_t kVocab = 50;
constexpr int32_t kBlocks = 64, kBlockSize = 4;
constexpr int64_t kWidth = 2;  // [prediction, prediction + 0.5]: a row of two floats

class FakePoolingExecutor : public ModelExecutor {
 public:
  FakePoolingExecutor() : model_(kBlocks, kBlockSize, kVocab) {}
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    ++steps;
    out.vocab_size = kWidth;
    out.logits.clear();
    for (int32_t t : model_.execute(so)) {
      out.logits.push_back(float(t));
      out.logits.push_back(float(t) + 0.5f);
    }
  }
  int steps = 0;

 private:
  FakeModel model_;
};

struct Pooling {
  FakePoolingExecutor* exec = nullptr;
  std::unique_ptr<Engine> engine;
};

Pooling make_engine(int64_t budget = 32, int64_t chunk = 8) {
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = budget;
  c.scheduler.long_prefill_token_threshold = chunk;
  c.scheduler.max_num_seqs = 8;
  c.scheduler.max_model_len = 64;
  c.cache.block_size = kBlockSize;
  c.cache.num_blocks = kBlocks;
  c.vocab_size = kVocab;
  c.pooled_width = kWidth;
  auto exec = std::make_unique<FakePoolingExecutor>();
  Pooling p;
  p.exec = exec.get();
  p.engine = std::make_unique<Engine>(c, std::move(exec));
  return p;
}

EngineRequest pooling_request(const std::string& id, Ids prompt) {
  EngineRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.pooling = true;
  return r;
}

Ids prompt_of(int seed, int len) {
  Ids p;
  for (int i = 0; i < len; ++i) p.push_back((seed * 7 + i * 3) % kVocab);
  return p;
}

std::map<std::string, RequestOutput> run(Engine& e) {
  std::map<std::string, RequestOutput> out;
  for (int i = 0; i < 1000 && e.has_unfinished_requests(); ++i)
    for (RequestOutput& o : e.step()) {
      EXPECT_FALSE(out.contains(o.request_id)) << o.request_id << " gave a second output";
      out[o.request_id] = std::move(o);
    }
  return out;
}

std::vector<float> expected_row(const Ids& prompt) {
  const float t = float(FakeModel::next_token(prompt, kVocab));
  return {t, t + 0.5f};
}

TEST(PoolingEngine, EachRequestFinishesWithItsRowAndFreesItsBlocks) {
  Pooling p = make_engine();
  for (int i = 0; i < 6; ++i) p.engine->add_request(pooling_request("p" + std::to_string(i), prompt_of(i, 3 + 7 * i)));
  const auto out = run(*p.engine);
  ASSERT_EQ(out.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    const RequestOutput& o = out.at("p" + std::to_string(i));
    EXPECT_EQ(o.pooled, expected_row(prompt_of(i, 3 + 7 * i))) << i;
    EXPECT_EQ(o.finish_reason, FinishReason::Stop);
    EXPECT_TRUE(o.new_token_ids.empty());
    EXPECT_TRUE(o.request_finished);
    EXPECT_EQ(o.num_prompt_tokens, 3 + 7 * i);
  }
  EXPECT_EQ(p.engine->stats().pooled_requests, 6);
  EXPECT_EQ(p.engine->stats().generated_tokens, 0);
  EXPECT_EQ(p.engine->scheduler().kv_cache_manager().block_pool().num_free_blocks(), kBlocks);
  EXPECT_FALSE(p.engine->has_unfinished_requests());
}

TEST(PoolingEngine, LongInputsAreChunkedAndBatchedUnderTheBudget) {
  // 64 tokens at most 8 per step: 8 steps for one input; six inputs share steps of 16 tokens.
  Pooling alone = make_engine(16, 8);
  alone.engine->add_request(pooling_request("long", prompt_of(3, 64)));
  const auto a = run(*alone.engine);
  EXPECT_EQ(a.at("long").pooled, expected_row(prompt_of(3, 64)));
  EXPECT_EQ(alone.exec->steps, 8);
  Pooling many = make_engine(16, 8);
  for (int i = 0; i < 6; ++i) many.engine->add_request(pooling_request("m" + std::to_string(i), prompt_of(i, 20)));
  const auto m = run(*many.engine);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(m.at("m" + std::to_string(i)).pooled, expected_row(prompt_of(i, 20)));
  EXPECT_EQ(many.exec->steps, 6 * 20 / 16 + 1);  // every step full but the last
}

TEST(PoolingEngine, ThePrefixCacheServesASharedPrefix) {
  Pooling p = make_engine();
  Ids shared = prompt_of(9, 24);
  Ids a = shared, b = shared;
  a.push_back(1);
  b.push_back(2);
  p.engine->add_request(pooling_request("a", a));
  const auto first = run(*p.engine);
  p.engine->add_request(pooling_request("b", b));
  p.engine->add_request(pooling_request("a-again", a));
  const auto second = run(*p.engine);
  EXPECT_EQ(first.at("a").num_cached_tokens, 0);
  EXPECT_EQ(second.at("b").num_cached_tokens, 24);  // 6 full blocks of the shared prefix
  EXPECT_EQ(second.at("a-again").num_cached_tokens, 24);  // the last token is always computed
  EXPECT_EQ(second.at("b").pooled, expected_row(b));
  EXPECT_EQ(second.at("a-again").pooled, first.at("a").pooled);
}

TEST(PoolingEngine, RefusesTheOtherKindOfRequestAndOverlongInputs) {
  Pooling p = make_engine();
  EngineRequest gen;
  gen.request_id = "g";
  gen.prompt_token_ids = {1, 2, 3};
  gen.params.max_tokens = 4;
  EXPECT_THROW(
      {
        try {
          p.engine->add_request(gen);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("--runner pooling"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(p.engine->add_request(pooling_request("too-long", prompt_of(1, 65))), Error);
  p.engine->add_request(pooling_request("exactly", prompt_of(1, 64)));  // max_model_len itself fits
  EXPECT_EQ(run(*p.engine).at("exactly").pooled, expected_row(prompt_of(1, 64)));

  EngineConfig c;
  c.cache.block_size = kBlockSize;
  c.cache.num_blocks = kBlocks;
  c.vocab_size = kVocab;  // pooled_width 0: a generate engine
  Engine generate(c, std::make_unique<FakePoolingExecutor>());
  EXPECT_THROW(generate.add_request(pooling_request("p", {1, 2})), Error);
}

}  // namespace
}  // namespace pypto
