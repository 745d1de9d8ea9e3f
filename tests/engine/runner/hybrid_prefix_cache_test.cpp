// Prefix caching on a hybrid model (tiny-hybrid: Gated DeltaNet and gated-attention layers): hits
// resume the recurrent state from snapshots taken at block boundaries (engine/state_snapshots.h),
// and greedy output is the same as with no cache at all: for requests sharing a long prefix, for
// the turns of a chat (each turn's prompt repeats the last one and its answer), with a KV pool and
// a snapshot budget small enough to evict, and through preemption. Each test also checks that hits
// really happened (a cache that never hits passes the equality checks trivially).
#include <gtest/gtest.h>

#include <map>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "model_harness.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 16;
constexpr int32_t kMaxSeqs = 8;

// tiny-hybrid with kMaxSeqs state slots and `snapshots` snapshot entries (a model per count).
Qwen3Model& hybrid_model(int32_t snapshots) {
  static std::map<int32_t, std::unique_ptr<test::LoadedModel>> models;
  std::unique_ptr<test::LoadedModel>& m = models[snapshots];
  if (!m) {
    TestModelOptions o;
    o.preset = "tiny-hybrid";
    m = test::load_model(test::ensure_test_model("tiny-hybrid", o), /*scalar=*/false);
    m->weights.state_slots = kMaxSeqs;
    m->weights.state_snapshots = snapshots;
    m->model = std::make_unique<Qwen3Model>(m->weights, *m->backend);
  }
  return *m->model;
}

struct HybridSetup {
  int32_t num_blocks = 256;
  int64_t threshold = 2048;
  bool prefix_caching = true;
  int32_t snapshots = 16;
  int64_t interval = 32;  // tokens between interval snapshots
  int max_tokens = 8;
};

struct HybridEngine {
  explicit HybridEngine(const HybridSetup& s) : setup(s) {
    Qwen3Model& model = hybrid_model(s.prefix_caching ? s.snapshots : 0);
    cache = std::make_unique<KvCache>(model.kv_cache_spec(s.num_blocks, kBlockSize, DType::BF16));
    EngineConfig c;
    c.scheduler.max_num_seqs = kMaxSeqs;
    c.scheduler.max_num_batched_tokens = 4096;
    c.scheduler.long_prefill_token_threshold = s.threshold;
    c.scheduler.max_model_len = 512;
    c.cache.block_size = kBlockSize;
    c.cache.num_blocks = s.num_blocks;
    c.cache.enable_prefix_caching = s.prefix_caching;
    c.cache.recurrent_state = true;
    c.cache.state_snapshots = s.prefix_caching ? s.snapshots : 0;
    c.cache.state_snapshot_interval = s.interval;
    c.vocab_size = model.vocab_size();
    engine = std::make_unique<Engine>(c, std::make_unique<ModelRunner>(model, *cache));
  }

  // Greedy tokens of each prompt, keyed tag + index; cached[i] gets prompt i's cached tokens.
  std::map<std::string, Ids> run(const std::vector<Ids>& prompts, const std::string& tag = "p",
                                 std::vector<int64_t>* cached = nullptr) {
    for (size_t i = 0; i < prompts.size(); ++i) {
      EngineRequest r;
      r.request_id = tag + std::to_string(i);
      r.prompt_token_ids = prompts[i];
      r.params.temperature = 0.0f;
      r.params.max_tokens = setup.max_tokens;
      r.params.ignore_eos = true;
      engine->add_request(r);
    }
    if (cached) cached->assign(prompts.size(), -1);
    std::map<std::string, Ids> out;
    for (int step = 0; step < 10000 && engine->has_unfinished_requests(); ++step)
      for (const RequestOutput& o : engine->step()) {
        EXPECT_NE(o.finish_reason, FinishReason::Error) << o.error;
        Ids& t = out[o.request_id];
        t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        if (cached && o.finish_reason) (*cached)[std::stoul(o.request_id.substr(tag.size()))] = o.num_cached_tokens;
      }
    return out;
  }

  PrefixCacheStats stats() const { return engine->scheduler().kv_cache_manager().prefix_cache_stats(); }

  HybridSetup setup;
  std::unique_ptr<KvCache> cache;
  std::unique_ptr<Engine> engine;
};

std::vector<Ids> with_prefix(const Ids& prefix, int n, uint64_t seed) {
  std::vector<Ids> out;
  for (int i = 0; i < n; ++i) {
    Ids p = prefix;
    const Ids tail = test::random_prompt(5 + (i * 13) % 40, seed + uint64_t(i));
    p.insert(p.end(), tail.begin(), tail.end());
    out.push_back(p);
  }
  return out;
}

// Each prompt alone through an engine without prefix caching.
std::vector<Ids> cold(const std::vector<Ids>& prompts, int max_tokens = 8) {
  HybridSetup off;
  off.prefix_caching = false;
  off.max_tokens = max_tokens;
  std::vector<Ids> out;
  for (const Ids& p : prompts) out.push_back(HybridEngine(off).run({p})["p0"]);
  return out;
}

void expect_same(const std::map<std::string, Ids>& got, const std::vector<Ids>& want, const std::string& tag) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got.at(tag + std::to_string(i)), want[i]) << tag << i;
}

// Without snapshot entries a hybrid never hits, however much of the prompt is cached.
TEST(HybridPrefixCache, NoSnapshotsNoHits) {
  const auto prompts = with_prefix(test::random_prompt(70, 11), 3, 300);
  const auto want = cold(prompts);
  HybridSetup s;
  s.snapshots = 0;
  HybridEngine e(s);
  expect_same(e.run(prompts, "a"), want, "a");
  expect_same(e.run(prompts, "b"), want, "b");
  EXPECT_EQ(e.stats().hit_tokens, 0);
}

// Requests sharing a 70-token prefix: the second wave (new tails) resumes at the interval
// snapshot at 64 the first wave took; the same prompts again resume at their own last snapshot.
TEST(HybridPrefixCache, SharedLongPrefixMatchesColdAndHits) {
  const Ids prefix = test::random_prompt(70, 12);
  const auto first = with_prefix(prefix, 6, 400), second = with_prefix(prefix, 6, 500);
  const auto want_first = cold(first), want_second = cold(second);
  HybridSetup s;
  s.snapshots = 96;  // room for every snapshot of the three waves: nothing is evicted
  HybridEngine e(s);
  expect_same(e.run(first, "a"), want_first, "a");
  EXPECT_EQ(e.stats().hit_tokens, 0);  // all admitted in one step, before anything is cached
  std::vector<int64_t> cached;
  expect_same(e.run(second, "b", &cached), want_second, "b");
  for (size_t i = 0; i < second.size(); ++i) EXPECT_EQ(cached[i], 64) << "b" << i;  // the last interval snapshot in the prefix
  const int64_t restored = e.stats().state.restored;
  EXPECT_EQ(restored, int64_t(second.size()));
  expect_same(e.run(first, "c", &cached), want_first, "c");
  // The first wave's prompts again: each resumes at its own prompt's last block boundary
  // (a snapshot of the prompt's final chunk), short of its last token.
  for (size_t i = 0; i < first.size(); ++i)
    EXPECT_EQ(cached[i], int64_t(first[i].size() - 1) / kBlockSize * kBlockSize) << "c" << i;
  EXPECT_EQ(e.stats().state.restored, restored + int64_t(first.size()));
}

// A four-turn chat: turn k's prompt is turn k-1's prompt, its answer and a new message. Each
// turn resumes where the previous one's computed tokens end (the block boundary of its last
// decode-time snapshot), so it prefills only the new message and the few tokens past it.
TEST(HybridPrefixCache, FourTurnChatMatchesColdAndResumesEachTurn) {
  HybridSetup s;
  s.max_tokens = 12;
  HybridEngine e(s);
  Ids prompt = test::random_prompt(90, 13);
  int64_t expect_cached = 0;
  for (int turn = 0; turn < 4; ++turn) {
    SCOPED_TRACE("turn " + std::to_string(turn));
    const std::string tag = "t" + std::to_string(turn) + "_";
    const Ids want = cold({prompt}, s.max_tokens)[0];
    std::vector<int64_t> cached;
    const Ids got = e.run({prompt}, tag, &cached)[tag + "0"];
    EXPECT_EQ(got, want);
    EXPECT_EQ(cached[0], expect_cached);
    // The last answer token is never fed back: the turn computed all tokens but that one.
    const int64_t computed = int64_t(prompt.size() + got.size()) - 1;
    expect_cached = computed / kBlockSize * kBlockSize;
    const Ids msg = test::random_prompt(20 + 7 * turn, 600 + uint64_t(turn));
    prompt.insert(prompt.end(), got.begin(), got.end());
    prompt.insert(prompt.end(), msg.begin(), msg.end());
  }
  EXPECT_EQ(e.stats().state.restored, 3);
}

// Three snapshot entries and a KV pool of 12 blocks (192 tokens) for one ~100-token request
// after another, from prefix p1 twice, then p2 twice, then p1 twice: each request evicts most
// of what the one before cached (snapshots and blocks), yet the second of each pair still resumes
// at the prefix's interval snapshot (64), and every output is a cold run's.
TEST(HybridPrefixCache, EvictionUnderSmallPoolsMatchesCold) {
  HybridSetup s;
  s.num_blocks = 12;
  s.snapshots = 3;
  HybridEngine e(s);
  const Ids p1 = test::random_prompt(70, 14), p2 = test::random_prompt(66, 15);
  const Ids* order[] = {&p1, &p1, &p2, &p2, &p1, &p1};
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const auto prompt = with_prefix(*order[i], 1, 700 + uint64_t(i) * 10);
    std::vector<int64_t> cached;
    const std::string tag = "r" + std::to_string(i) + "_";
    expect_same(e.run(prompt, tag, &cached), cold(prompt), tag);
    EXPECT_EQ(cached[0], i % 2 ? 64 : 0);
  }
  EXPECT_EQ(e.stats().state.restored, 3);
  EXPECT_GT(e.stats().state.evicted, 0);
}

// A pool of 16 blocks for six 75..115-token prompts in 32-token chunks: requests are preempted and
// recompute, resuming from snapshots of their own prefix where those survived.
TEST(HybridPrefixCache, PreemptionMatchesCold) {
  const auto prompts = with_prefix(test::random_prompt(70, 16), 6, 800);
  const auto want = cold(prompts);
  HybridSetup s;
  s.num_blocks = 16;
  s.threshold = 32;
  HybridEngine e(s);
  expect_same(e.run(prompts, "p"), want, "p");
  EXPECT_GT(e.engine->scheduler().num_preemptions(), 0);
  EXPECT_GT(e.stats().state.restored, 0);
}

}  // namespace
}  // namespace pypto
