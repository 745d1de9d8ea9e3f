// Randomised scheduler runs: arrivals, aborts, shared prefixes, tiny pools, with and without
// chunking and prefix caching. After every step the block accounting must add up, the limits must
// hold, and every request that finishes normally must have produced exactly the tokens it
// produces alone.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>

#include "core/error.h"
#include "engine/scheduler.h"
#include "fake_model.h"
#include "sampling/philox.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
using testing::FakeModel;

constexpr int32_t kVocab = 97;

struct Scenario {
  uint64_t seed;
  int32_t block_size;
  int32_t num_blocks;
  bool prefix_caching;
  bool chunked;
  int64_t budget;
  int64_t threshold;
  int32_t max_seqs;
  bool weak_hash = false;  // hash the block's tokens only: equal blocks under different prefixes collide
};

BlockHash tokens_only_hash(const BlockHash*, std::span<const int32_t> tokens) {
  BlockHash h;
  for (size_t i = 0; i < tokens.size(); ++i) h.bytes[i % h.bytes.size()] ^= uint8_t(tokens[i] * 13 + int32_t(i));
  return h;
}

class RandomRun {
 public:
  explicit RandomRun(const Scenario& sc)
      : sc_(sc),
        sched_(config(sc), cache(sc), sc.weak_hash ? BlockHasher(tokens_only_hash) : BlockHasher(sha256_block_hash)),
        model_(sc.num_blocks, sc.block_size, kVocab) {}

  static SchedulerConfig config(const Scenario& sc) {
    SchedulerConfig c;
    c.max_num_seqs = sc.max_seqs;
    c.max_num_batched_tokens = sc.budget;
    c.max_model_len = 48;
    c.enable_chunked_prefill = sc.chunked;
    c.long_prefill_token_threshold = sc.threshold;
    return c;
  }
  static CacheConfig cache(const Scenario& sc) {
    CacheConfig c;
    c.block_size = sc.block_size;
    c.num_blocks = sc.num_blocks;
    c.enable_prefix_caching = sc.prefix_caching;
    return c;
  }

  double rand() { return philox_uniform(sc_.seed, draws_++); }
  int32_t rand_int(int32_t lo, int32_t hi) { return lo + int32_t(rand() * double(hi - lo + 1)); }

  void maybe_add() {
    if (added_ >= 40 || rand() > 0.35) return;
    // Prompts from a few shared stems so prefix hits (and duplicate cached blocks) happen; a
    // stem may start with a repeated block, so equal blocks sit under different prefixes.
    Ids prompt;
    if (rand() < 0.3)
      for (int32_t i = 0; i < 8; ++i) prompt.push_back(i % 4);
    const int32_t stem = rand_int(0, 3);
    const int32_t stem_len = rand_int(0, 12);
    for (int32_t i = 0; i < stem_len; ++i) prompt.push_back((stem * 31 + i * 7) % kVocab);
    const int32_t tail = rand_int(1, 12);
    for (int32_t i = 0; i < tail; ++i) prompt.push_back(rand_int(0, kVocab - 1));
    const int32_t max_tokens = rand_int(1, 48 - int32_t(prompt.size()));
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    const std::string id = "r" + std::to_string(added_++);
    try {
      sched_.add_request(std::make_unique<Request>(id, prompt, p, Ids{}, 0));
    } catch (const Error&) {
      ++rejected_;  // more blocks than the pool has: rejected on arrival, never queued
      return;
    }
    live_.insert(id);
    prompts_[id] = prompt;
    max_tokens_[id] = max_tokens;
  }

  void maybe_abort() {
    if (live_.empty() || rand() > 0.04) return;
    auto it = live_.begin();
    std::advance(it, rand_int(0, int32_t(live_.size()) - 1));
    const std::string id = *it;
    sched_.finish_requests(std::span<const std::string>(&id, 1), RequestStatus::FinishedAborted);
    live_.erase(id);
    aborted_.insert(id);
  }

  void check_accounting() {
    const BlockPool& pool = sched_.kv_cache_manager().block_pool();
    std::map<int32_t, int32_t> refs;
    for (const std::string& id : live_)
      for (int32_t b : sched_.kv_cache_manager().block_ids(id)) ++refs[b];
    int32_t free_count = 0;
    for (int32_t b = 0; b < pool.num_blocks(); ++b) {
      ASSERT_EQ(pool.block(b).ref_cnt, refs[b]) << "block " << b;
      free_count += pool.block(b).ref_cnt == 0;
    }
    ASSERT_EQ(pool.num_free_blocks(), free_count);
    for (int32_t b : pool.free_block_ids()) ASSERT_EQ(pool.block(b).ref_cnt, 0);
    ASSERT_LE(sched_.num_running(), size_t(sc_.max_seqs));
  }

  void step() {
    SchedulerOutput so = sched_.schedule();
    ASSERT_LE(so.total_num_scheduled_tokens, sc_.budget);
    for (const ScheduledRequest& s : so.scheduled) {
      if (sc_.chunked) ASSERT_LE(s.num_scheduled_tokens, sc_.threshold);
      ASSERT_TRUE(live_.contains(s.req_id));
    }
    const Ids tokens = model_.execute(so);
    std::vector<SampledToken> sampled(so.scheduled.size());
    size_t k = 0;
    for (size_t i = 0; i < so.scheduled.size(); ++i)
      if (so.scheduled[i].samples) sampled[i].token_id = tokens.at(k++);
    for (const EngineCoreOutput& o : sched_.update_from_output(so, sampled)) {
      Ids& out = outputs_[o.req_id];
      out.insert(out.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finish_reason) {
        live_.erase(o.req_id);
        finished_.insert(o.req_id);
      }
    }
  }

  void run() {
    for (int i = 0; i < 20000 && (added_ < 40 || sched_.has_unfinished_requests()); ++i) {
      maybe_add();
      maybe_abort();
      step();
      if (::testing::Test::HasFatalFailure()) return;
      check_accounting();
      if (::testing::Test::HasFatalFailure()) return;
    }
    EXPECT_FALSE(sched_.has_unfinished_requests()) << "did not drain";
    for (const std::string& id : finished_)
      EXPECT_EQ(outputs_[id], FakeModel::reference(prompts_[id], max_tokens_[id], kVocab)) << id;
    for (const std::string& id : aborted_) {
      const Ids want = FakeModel::reference(prompts_[id], max_tokens_[id], kVocab);
      const Ids& got = outputs_[id];
      EXPECT_TRUE(got.size() <= want.size() && std::equal(got.begin(), got.end(), want.begin())) << id;
    }
    EXPECT_EQ(sched_.kv_cache_manager().block_pool().num_free_blocks(), sc_.num_blocks);
    EXPECT_GT(finished_.size(), 10u);
  }

  int64_t preemptions() const { return sched_.num_preemptions(); }
  int64_t hit_tokens() const { return sched_.kv_cache_manager().prefix_cache_stats().hit_tokens; }

 private:
  Scenario sc_;
  Scheduler sched_;
  FakeModel model_;
  uint64_t draws_ = 0;
  int added_ = 0;
  int rejected_ = 0;
  std::set<std::string> live_, finished_, aborted_;
  std::map<std::string, Ids> prompts_, outputs_;
  std::map<std::string, int32_t> max_tokens_;
};

TEST(SchedulerRandom, AccountingAndOutputsHoldUnderChurn) {
  int64_t preemptions = 0, hits = 0;
  int n = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed)
    for (int32_t bs : {1, 3, 4, 8})
      for (int prefix_mode : {0, 1, 2})  // off, SHA-256, colliding hash
        for (bool chunked : {true, false}) {
          const bool prefix = prefix_mode > 0;
          // Tiny pools (just above the largest request) force preemption; budgets and thresholds
          // force chunking.
          const int32_t pool = (48 + bs - 1) / bs + int32_t(seed % 3) * 2;
          Scenario sc{seed * 100 + uint64_t(bs), bs, pool, prefix, chunked, chunked ? 13 : 48, 5, 6, prefix_mode == 2};
          SCOPED_TRACE(::testing::Message() << "seed " << seed << " block " << bs << " prefix mode " << prefix_mode
                                            << " chunked " << chunked);
          RandomRun run(sc);
          run.run();
          if (::testing::Test::HasFailure()) return;
          preemptions += run.preemptions();
          hits += run.hit_tokens();
          ++n;
        }
  EXPECT_EQ(n, 144);
  EXPECT_GT(preemptions, 0);  // the scenarios really exercise preemption
  EXPECT_GT(hits, 0);         // and prefix hits
}

}  // namespace
}  // namespace pypto
