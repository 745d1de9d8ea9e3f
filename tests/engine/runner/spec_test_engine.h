#pragma once
// The engine the speculative-decoding engine tests build over a loaded test model: a KV pool
// (SpecTestPool), sequences of at most 512 tokens, the prompt chunking, token budget, prefix
// caching and speculation of a SpecTestSetup (cost model off unless asked: the mechanics tests
// draft every step), a hybrid target's recurrent state (with snapshots when prefix caching), and
// the test's executor with its drafter when k > 0 (a ModelRunner without speculation). run()
// feeds prompts through run_spec_requests and returns the outputs with the scheduler's acceptance
// counters. Also the tests' prompts, and the acceptance a k = 1 run must show when the test knows
// which drafts are right.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/spec_throttle.h"
#include "model_harness.h"
#include "spec_engine_run.h"

namespace pypto::test {

struct SpecTestPool {
  int32_t max_seqs = 8;
  int32_t blocks = 256;  // target KV blocks
  int32_t block_size = 16;
  int32_t snapshots = 32;  // a hybrid's state snapshots when prefix caching
};

struct SpecTestSetup {
  int32_t k = 0;             // 0: no speculation
  int64_t threshold = 2048;  // long_prefill_token_threshold (the prompt chunk)
  int64_t budget = 4096;     // max_num_batched_tokens
  bool prefix_caching = false;
  float temperature = 0.0f;
  bool cost_model = false;  // the mechanics tests draft every step; the cost model's own test sets it
  uint64_t seed0 = 77;      // request i's sampling seed is seed0 + i
};

struct SpecTestOutcome {
  std::map<std::string, std::vector<int32_t>> tokens;
  SpecDecodeStats stats;  // the engine's totals so far
  int64_t hits = 0;       // prompt tokens served from the prefix cache in this run
  std::map<std::string, int64_t> cached;  // the same per request
};

// The engine config of `s` over `model` with `pool`; with k > 0 the speculative k and cost model,
// the method and drafter left to the test.
inline EngineConfig spec_test_config(const Qwen3Model& model, const SpecTestSetup& s, const SpecTestPool& pool) {
  EngineConfig c;
  c.scheduler.max_num_seqs = pool.max_seqs;
  c.scheduler.max_num_batched_tokens = s.budget;
  c.scheduler.long_prefill_token_threshold = s.threshold;
  c.scheduler.max_model_len = 512;
  c.cache.block_size = pool.block_size;
  c.cache.num_blocks = pool.blocks;
  c.cache.enable_prefix_caching = s.prefix_caching;
  if (model.hybrid()) {
    c.cache.recurrent_state = true;
    c.cache.state_snapshots = s.prefix_caching ? pool.snapshots : 0;
    c.cache.state_snapshot_interval = 32;
  }
  c.vocab_size = model.vocab_size();
  if (s.k > 0) {
    c.scheduler.speculative.num_speculative_tokens = s.k;
    c.scheduler.speculative.cost_model = s.cost_model;
  }
  return c;
}

// What the test's method adds to the config when k > 0: c.scheduler.speculative's method (and its
// draft's directory), c.drafter; returns the executor over the target's KV `cache`.
using SpecTestAttach = std::function<std::unique_ptr<ModelExecutor>(EngineConfig& c, KvCache& cache)>;

class SpecTestEngine {
 public:
  SpecTestEngine(Qwen3Model& model, const SpecTestSetup& s, const SpecTestAttach& attach, const SpecTestPool& pool = {})
      : s_(s) {
    cache_ = std::make_unique<KvCache>(model.kv_cache_spec(pool.blocks, pool.block_size, DType::BF16));
    EngineConfig c = spec_test_config(model, s, pool);
    std::unique_ptr<ModelExecutor> exec =
        s.k > 0 ? attach(c, *cache_) : std::make_unique<ModelRunner>(model, *cache_);
    engine_ = std::make_unique<Engine>(c, std::move(exec));
  }

  SpecTestOutcome run(const std::vector<std::vector<int32_t>>& prompts, int32_t max_tokens, const std::string& tag = "p") {
    SpecRunResult r = run_spec_requests(*engine_, prompts, max_tokens, s_.temperature, s_.seed0, tag);
    return SpecTestOutcome{std::move(r.tokens), engine_->scheduler().spec_decode_stats(), r.hits, std::move(r.cached)};
  }

  Engine& engine() { return *engine_; }
  const Engine& engine() const { return *engine_; }

 private:
  SpecTestSetup s_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Engine> engine_;
};

// n random prompts of len, len + 7, .. tokens (seeds 900 + i).
inline std::vector<std::vector<int32_t>> spec_test_prompts(int n, int len = 11) {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) out.push_back(random_prompt(len + 7 * i, uint64_t(900 + i)));
  return out;
}

struct SpecAcceptance {
  int64_t drafted = 0, accepted = 0;
};

// The drafts and acceptances of a one-request greedy run at k = 1 to `max_tokens` tokens whose
// output is `out` (the plain run's), replayed through the scheduler's rules: from the second token
// on, each step drafts one token if the request's throttle and its remaining tokens allow; the
// draft for output position o is accepted iff right(o), and an accepted draft emits two tokens.
inline SpecAcceptance replay_k1_acceptance(const std::vector<int32_t>& out, int64_t max_tokens,
                                           const std::function<bool(size_t)>& right) {
  SpecThrottle throttle(1);
  SpecAcceptance a;
  for (size_t o = 1; o < out.size();) {
    const int32_t k = std::min<int32_t>(throttle.next_k(), int32_t(max_tokens - int64_t(o) - 1));
    if (k <= 0) {
      ++o;
      continue;
    }
    const bool ok = right(o);
    ++a.drafted;
    a.accepted += ok;
    throttle.observe(1, ok);
    o += ok ? 2 : 1;
  }
  return a;
}

}  // namespace pypto::test
