// A long shared document through the prefix cache (issue 31, point 4), on the real Qwen3 forward
// pass (tiny random-weight checkpoint, CPU kernels): request A (a 3,000-token document and its own
// question, prefilled in chunks of 512) runs first; request B (the same document, another
// question) then finds every full block of the document in the cache, the hit counted in
// prefix_cache_stats (vllm:prefix_cache_hits_total) and in B's num_cached_tokens, and B's greedy
// tokens equal B's alone through an engine without prefix caching. For the bf16 and int8 caches.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "model_harness.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int kNewTokens = 8;
constexpr int32_t kBlockSize = 16;
constexpr int kDocTokens = 3000;

test::LoadedModel& tiny_model() {
  static std::unique_ptr<test::LoadedModel> m =
      test::load_model(test::ensure_test_model("tiny", TestModelOptions{}), /*scalar=*/false);
  return *m;
}

struct DocEngine {
  DocEngine(DType kv, bool prefix_caching) {
    Qwen3Model& model = *tiny_model().model;
    constexpr int32_t kBlocks = 512;  // two documents' worth: nothing of A is evicted for B
    cache = std::make_unique<KvCache>(model.kv_cache_spec(kBlocks, kBlockSize, kv));
    EngineConfig c;
    c.scheduler.max_num_batched_tokens = 512;
    c.scheduler.long_prefill_token_threshold = 512;
    c.scheduler.max_model_len = 4096;
    c.cache.block_size = kBlockSize;
    c.cache.num_blocks = kBlocks;
    c.cache.enable_prefix_caching = prefix_caching;
    c.vocab_size = model.vocab_size();
    engine = std::make_unique<Engine>(c, std::make_unique<ModelRunner>(model, *cache));
  }

  // Greedy tokens of one request, run to its end; its num_cached_tokens in *cached.
  Ids run(const std::string& id, const Ids& prompt, int64_t* cached = nullptr) {
    EngineRequest r;
    r.request_id = id;
    r.prompt_token_ids = prompt;
    r.params.temperature = 0.0f;
    r.params.max_tokens = kNewTokens;
    r.params.ignore_eos = true;
    engine->add_request(r);
    Ids out;
    for (int step = 0; step < 1000 && engine->has_unfinished_requests(); ++step)
      for (const RequestOutput& o : engine->step()) {
        EXPECT_NE(o.finish_reason, FinishReason::Error) << o.error;
        out.insert(out.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        if (cached && o.finish_reason) *cached = o.num_cached_tokens;
      }
    return out;
  }

  int64_t hit_tokens() const { return engine->scheduler().kv_cache_manager().prefix_cache_stats().hit_tokens; }

  std::unique_ptr<KvCache> cache;
  std::unique_ptr<Engine> engine;
};

void shared_document(DType kv) {
  const Ids doc = test::random_prompt(kDocTokens, 31);
  Ids a = doc, b = doc;
  const Ids qa = test::random_prompt(21, 1), qb = test::random_prompt(13, 2);
  a.insert(a.end(), qa.begin(), qa.end());
  b.insert(b.end(), qb.begin(), qb.end());

  DocEngine cold(kv, /*prefix_caching=*/false);
  const Ids want = cold.run("b", b);
  ASSERT_EQ(want.size(), size_t(kNewTokens));
  EXPECT_EQ(cold.hit_tokens(), 0);

  DocEngine warm(kv, /*prefix_caching=*/true);
  int64_t cached_a = -1, cached_b = -1;
  warm.run("a", a, &cached_a);
  EXPECT_EQ(cached_a, 0);
  EXPECT_EQ(warm.hit_tokens(), 0);
  const Ids got = warm.run("b", b, &cached_b);
  const int64_t doc_blocks = kDocTokens / kBlockSize;  // the document's full blocks (187: 2,992 tokens)
  EXPECT_EQ(cached_b, doc_blocks * kBlockSize);
  EXPECT_EQ(warm.hit_tokens(), doc_blocks * kBlockSize);
  EXPECT_EQ(got, want) << "B after a prefix-cache hit on the document differs from B computed in full";
}

TEST(LongPrefixCache, SharedDocumentHitsAndKeepsTheOutputBf16) { shared_document(DType::BF16); }
TEST(LongPrefixCache, SharedDocumentHitsAndKeepsTheOutputInt8) { shared_document(DType::I8); }

}  // namespace
}  // namespace pypto
