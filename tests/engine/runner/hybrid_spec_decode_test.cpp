// Speculative decoding on a hybrid target (tiny-hybrid: Gated DeltaNet and gated-attention
// layers): a verify step advances each sequence's recurrent state through all of its k drafts, so
// after a rejection the sequence must continue from the state at its last accepted token, kept
// by the step (model/gdn_rollback.h). Greedy output must equal the run without speculation token
// for token — alone, batched with prefill chunks, prefix-cached (a hit resumes from a state
// snapshot, and snapshots taken at rejected drafts never become hits), over a multi-turn chat and
// with seeded sampling — while the accept path and the roll-back path both demonstrably run.
//
// Random weights almost never repeat themselves, so n-gram drafts find no match on this model.
// The drafts here come from a scripted drafter instead: the plain run's own continuation (so
// they are accepted) with one draft per step replaced by a wrong token, its index cycling with
// the position, so steps accept 0, 1, .. k - 1 drafts or all k: every rollback depth is taken.
// (n-gram on a hybrid: tests/cli HybridSpeculativeCli.)
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "model_harness.h"
#include "spec_test_engine.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr test::SpecTestPool kPool;  // the engine's KV pool and sequences
constexpr int32_t kMaxK = 4;

// One tiny-hybrid model for every test: a state slot per sequence, snapshot entries for prefix
// caching and rollback entries for k <= kMaxK.
Qwen3Model& hybrid_model() {
  static std::unique_ptr<test::LoadedModel> m;
  if (!m) {
    TestModelOptions o;
    o.preset = "tiny-hybrid";
    m = test::load_model(test::ensure_test_model("tiny-hybrid", o), /*scalar=*/false);
    m->weights.state_slots = kPool.max_seqs;
    m->weights.state_snapshots = 32;
    m->weights.state_rollback = kMaxK;
    m->model = std::make_unique<Qwen3Model>(m->weights, *m->backend);
  }
  return *m->model;
}

// Proposes the next k tokens of the known greedy continuation of whichever script the context
// is a prefix of, the draft at index (position mod (k + 1)) made wrong when that index is < k.
class ScriptedDrafter : public DraftProposer {
 public:
  explicit ScriptedDrafter(std::vector<Ids> scripts) : scripts_(std::move(scripts)) {}
  void propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const override {
    out.clear();
    for (const Ids& full : scripts_) {
      if (full.size() <= tokens.size() || !std::equal(tokens.begin(), tokens.end(), full.begin())) continue;
      const size_t pos = tokens.size();
      for (size_t j = pos; j < std::min(full.size(), pos + size_t(k)); ++j) out.push_back(full[j]);
      const size_t bad = pos % size_t(k + 1);
      if (bad < out.size()) out[bad] = (out[bad] + 1) % 151643;  // a token the target will not pick
      return;
    }
  }

 private:
  std::vector<Ids> scripts_;
};

struct Setup {
  int32_t k = 0;  // 0: no speculation
  std::vector<Ids> scripts;  // non-empty: the scripted drafter, else n-gram
  int64_t threshold = 2048;
  int64_t budget = 4096;
  bool prefix_caching = false;
  float temperature = 0.0f;
};

using Outcome = test::SpecTestOutcome;

class HybridEngine {
 public:
  explicit HybridEngine(const Setup& s)
      : e_(hybrid_model(), base(s), [&s](EngineConfig& c, KvCache& cache) {
          c.scheduler.speculative.method = s.scripts.empty() ? SpeculativeMethod::Ngram : SpeculativeMethod::DraftModel;
          c.scheduler.speculative.prompt_lookup_min = 2;
          c.scheduler.speculative.prompt_lookup_max = 5;
          if (!s.scripts.empty()) {
            c.scheduler.speculative.draft_model = "(scripted)";  // never loaded: the drafter is handed over
            c.drafter = std::make_shared<ScriptedDrafter>(s.scripts);
          }
          return std::make_unique<ModelRunner>(hybrid_model(), cache);
        }) {}

  Outcome run(const std::vector<Ids>& prompts, int32_t max_tokens, const std::string& tag = "p") {
    return e_.run(prompts, max_tokens, tag);
  }

  SpecDecodeStats spec() const { return e_.engine().scheduler().spec_decode_stats(); }
  PrefixCacheStats prefix() const { return e_.engine().scheduler().kv_cache_manager().prefix_cache_stats(); }

 private:
  // The mechanics, with every step drafting (the cost model off).
  static test::SpecTestSetup base(const Setup& s) {
    return {.k = s.k, .threshold = s.threshold, .budget = s.budget, .prefix_caching = s.prefix_caching,
            .temperature = s.temperature, .seed0 = 1234};
  }
  test::SpecTestEngine e_;
};

Outcome run_once(const Setup& s, const std::vector<Ids>& prompts, int32_t max_tokens) {
  return HybridEngine(s).run(prompts, max_tokens);
}

int64_t rollbacks() { return hybrid_model().rollback_states().num_rollbacks(); }

std::vector<Ids> make_prompts(int n, int len = 12) {
  std::vector<Ids> out;
  for (int i = 0; i < n; ++i) out.push_back(test::random_prompt(len + 9 * i, uint64_t(300 + i)));
  return out;
}

// Each prompt followed by its plain greedy continuation (`tokens` of them, and a few more so the
// last steps get drafts too).
std::vector<Ids> scripts_of(const std::vector<Ids>& prompts, const Outcome& plain, const std::string& tag = "p") {
  std::vector<Ids> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    Ids full = prompts[i];
    const Ids& t = plain.tokens.at(tag + std::to_string(i));
    full.insert(full.end(), t.begin(), t.end());
    out.push_back(full);
  }
  return out;
}

void expect_accepts_and_rejections(const SpecDecodeStats& st) {
  EXPECT_GT(st.num_accepted_tokens, 0) << "the accept path did not run";
  EXPECT_LT(st.num_accepted_tokens, st.num_draft_tokens) << "no draft was rejected: the roll-back path did not run";
}

TEST(HybridSpecDecode, GreedyOutputIsUnchangedAcrossAcceptsAndRollbacks) {
  const std::vector<Ids> prompts = make_prompts(3);
  const Outcome plain = run_once({}, prompts, 24);
  for (int32_t k : {1, 4}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    HybridEngine e({.k = k, .scripts = scripts_of(prompts, plain)});
    const int64_t before = rollbacks();
    const Outcome spec = e.run(prompts, 24);
    EXPECT_EQ(plain.tokens, spec.tokens);
    expect_accepts_and_rejections(e.spec());
    EXPECT_GT(rollbacks(), before) << "no sequence continued from a rolled-back state";
  }
}

TEST(HybridSpecDecode, BatchedWithChunkedPrefillIsUnchanged) {
  std::vector<Ids> prompts = make_prompts(2);
  for (int i = 0; i < 3; ++i) prompts.push_back(test::random_prompt(5 + 17 * i, uint64_t(400 + i)));
  const Outcome plain = run_once({}, prompts, 20);
  // Chunks of 7 tokens and a 40-token budget: verify steps share steps with prompt chunks.
  HybridEngine e({.k = 3, .scripts = scripts_of(prompts, plain), .threshold = 7, .budget = 40});
  EXPECT_EQ(plain.tokens, e.run(prompts, 20).tokens);
  expect_accepts_and_rejections(e.spec());
}

// Prefix caching: the same prompts twice through one engine (the second wave resumes from state
// snapshots, some of them taken inside verify steps), then a three-turn chat whose turns resume
// where the previous turn's verified tokens end. Every output equals a cold run's without
// speculation.
TEST(HybridSpecDecode, PrefixCachedWavesAndAChatAreUnchanged) {
  const Ids shared = test::random_prompt(40, 350);
  std::vector<Ids> prompts;
  for (int i = 0; i < 2; ++i) {
    Ids p = shared;
    const Ids tail = test::random_prompt(6 + 5 * i, uint64_t(360 + i));
    p.insert(p.end(), tail.begin(), tail.end());
    prompts.push_back(p);
  }
  const Outcome plain = run_once({}, prompts, 24);
  // A three-turn chat: turn t's prompt is turn t-1's prompt, its answer and a new message.
  std::vector<Ids> turns = {prompts[0]}, answers;
  for (int turn = 0; turn < 3; ++turn) {
    answers.push_back(run_once({}, {turns.back()}, 16).tokens.at("p0"));
    Ids next = turns.back();
    next.insert(next.end(), answers.back().begin(), answers.back().end());
    const Ids msg = test::random_prompt(9 + 4 * turn, 600 + uint64_t(turn));
    next.insert(next.end(), msg.begin(), msg.end());
    turns.push_back(next);
  }
  std::vector<Ids> scripts = scripts_of(prompts, plain);
  for (int turn = 0; turn < 3; ++turn) {
    Ids full = turns[size_t(turn)];
    full.insert(full.end(), answers[size_t(turn)].begin(), answers[size_t(turn)].end());
    scripts.push_back(full);
  }
  HybridEngine e({.k = 3, .scripts = scripts, .prefix_caching = true});
  EXPECT_EQ(e.run(prompts, 24, "p").tokens, plain.tokens);
  const Outcome again = e.run(prompts, 24, "p");
  EXPECT_EQ(again.tokens, plain.tokens);
  for (const auto& [id, n] : again.cached) EXPECT_GT(n, 0) << id << " did not hit the prefix cache";
  for (int turn = 0; turn < 3; ++turn) {
    SCOPED_TRACE("turn " + std::to_string(turn));
    const std::string tag = "t" + std::to_string(turn) + "_";
    const Outcome got = e.run({turns[size_t(turn)]}, 16, tag);
    EXPECT_EQ(got.tokens.at(tag + "0"), answers[size_t(turn)]);
    if (turn > 0) EXPECT_GT(got.cached.at(tag + "0"), 0);
  }
  expect_accepts_and_rejections(e.spec());
  EXPECT_GT(e.prefix().state.restored, 0);
}

// Seeded sampling: every emitted token is the one plain decoding draws at that position from the
// same prefix (engine/spec_verify.h), so the outputs are identical too.
TEST(HybridSpecDecode, SeededSamplingIsUnchanged) {
  const std::vector<Ids> prompts = make_prompts(2);
  const Outcome plain = run_once({.temperature = 0.7f}, prompts, 20);
  HybridEngine e({.k = 3, .scripts = scripts_of(prompts, plain), .temperature = 0.7f});
  EXPECT_EQ(plain.tokens, e.run(prompts, 20).tokens);
  EXPECT_GT(e.spec().num_draft_tokens, 0);
}

}  // namespace
}  // namespace pypto
