// Speculative decoding through the engine over the fake paged model (fake_model.h): n-gram drafts
// verified as k + 1 rows must change nothing in the output (greedy or seeded sampling, alone,
// batched, chunked, prefix-cached, preempted), while the accept path demonstrably runs
// (acceptance counts > 0 with a model whose output repeats). Stops inside an accepted run cut
// there; logprobs equal those without speculation.
#include <gtest/gtest.h>

#include <chrono>
#include <functional>

#include <map>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "engine/ngram_proposer.h"
#include "structured/regex.h"
#include "fake_model.h"

namespace pypto {
namespace {

using testing::FakeModel;
using Ids = std::vector<int32_t>;

constexpr int32_t kVocab = 50;
constexpr int32_t kBlockSize = 4;
constexpr FakeModel::Predictor copy_back = FakeModel::copy_back;  // period 3: drafts always right
constexpr FakeModel::Predictor mostly_copy = FakeModel::mostly_copy;  // drafts partly rejected

// Peaked: all mass on the prediction. Soft: the prediction is likely (logit 3 over 49 zeros, p ~
// 0.29) but seeded draws often pick another token, so sampled drafts are both accepted and rejected.
enum class Logits { Peaked, Soft };

class SpecFakeExecutor : public ModelExecutor {
 public:
  SpecFakeExecutor(int32_t num_blocks, FakeModel::Predictor predict, Logits mode)
      : model_(num_blocks, kBlockSize, kVocab, predict), mode_(mode) {}
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    out.vocab_size = kVocab;
    out.logits = model_.execute_logits(so);
    // A synthetic step time, reported rather than slept: the host's scheduling noise (several ms
    // when the tests run side by side) would drown the 0.3 ms differences the cost model must see.
    out.step_seconds = -1;
    if (step_cost) {  // from the largest rows per request in the step
      int64_t rows = 1;
      for (const ScheduledRequest& r : so.scheduled) rows = std::max(rows, 1 + r.num_draft_tokens);
      out.step_seconds = std::chrono::duration<double>(step_cost(rows)).count();
    }
    if (step_cost_by_drafts) {  // from the step's draft rows in all
      int64_t drafts = 0;
      for (const ScheduledRequest& r : so.scheduled) drafts += r.num_draft_tokens;
      out.step_seconds = std::chrono::duration<double>(step_cost_by_drafts(drafts)).count();
    }
    if (mode_ == Logits::Soft)
      for (float& x : out.logits) x = x > 0 ? 3.0f : 0.0f;
    rows += int64_t(out.logits.size()) / kVocab;
  }
  int64_t rows = 0;
  std::function<std::chrono::microseconds(int64_t rows)> step_cost;  // unset: no delay
  std::function<std::chrono::microseconds(int64_t drafts)> step_cost_by_drafts;

 private:
  FakeModel model_;
  Logits mode_;
};

struct Setup {
  FakeModel::Predictor predict = copy_back;
  Logits mode = Logits::Peaked;
  int32_t k = 0;  // 0: no speculation
  int32_t num_blocks = 64;
  int64_t budget = 64;
  int64_t threshold = 8;
  bool prefix_caching = true;
  bool cost_model = false;  // the mechanics tests draft every step they can
  std::function<std::chrono::microseconds(int64_t rows)> step_cost;
  std::function<std::chrono::microseconds(int64_t drafts)> step_cost_by_drafts;
};

std::unique_ptr<Engine> make_engine(const Setup& s, std::unique_ptr<SpecFakeExecutor> exec = nullptr) {
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = s.budget;
  c.scheduler.long_prefill_token_threshold = s.threshold;
  c.scheduler.max_model_len = 96;
  c.cache.block_size = kBlockSize;
  c.cache.num_blocks = s.num_blocks;
  c.cache.enable_prefix_caching = s.prefix_caching;
  c.vocab_size = kVocab;
  c.eos_token_ids = {kVocab - 1};
  if (s.k > 0) {
    c.scheduler.speculative.method = SpeculativeMethod::Ngram;
    c.scheduler.speculative.num_speculative_tokens = s.k;
    c.scheduler.speculative.prompt_lookup_min = 2;
    c.scheduler.speculative.prompt_lookup_max = 4;
    c.scheduler.speculative.cost_model = s.cost_model;
  }
  if (!exec) exec = std::make_unique<SpecFakeExecutor>(s.num_blocks, s.predict, s.mode);
  return std::make_unique<Engine>(c, std::move(exec));
}

struct Collected {
  std::map<std::string, Ids> tokens;
  std::map<std::string, std::vector<SampledToken>> logprobs;
  std::map<std::string, FinishReason> reasons;
  int64_t steps = 0;
};

Collected run(Engine& e) {
  Collected c;
  for (int i = 0; i < 2000 && e.has_unfinished_requests(); ++i) {
    for (const RequestOutput& o : e.step()) {
      const std::string id = o.request_id + "/" + std::to_string(o.index);
      Ids& t = c.tokens[id];
      t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      auto& lp = c.logprobs[id];
      lp.insert(lp.end(), o.new_logprobs.begin(), o.new_logprobs.end());
      if (o.finish_reason) c.reasons[id] = *o.finish_reason;
    }
    ++c.steps;
  }
  EXPECT_FALSE(e.has_unfinished_requests());
  return c;
}

Ids prompt_of(int seed, int len) {
  Ids p;
  for (int i = 0; i < len; ++i) p.push_back((seed * 7 + i * 3 + i * i) % (kVocab - 1));
  return p;
}

EngineRequest request(const std::string& id, Ids prompt, int32_t max_tokens) {
  EngineRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

// Runs the same requests with and without speculation; returns both collections and the
// speculating engine's counters.
struct Pair {
  Collected plain, spec;
  SpecDecodeStats stats;
  SpecCostStats cost;  // the speculating engine's cost model
  int64_t plain_rows = 0, spec_rows = 0;  // logits rows the model computed
};

Pair run_both(Setup s, const std::vector<EngineRequest>& reqs) {
  Pair p;
  for (int32_t k : {0, s.k}) {
    s.k = k;
    auto exec = std::make_unique<SpecFakeExecutor>(s.num_blocks, s.predict, s.mode);
    exec->step_cost = s.step_cost;
    exec->step_cost_by_drafts = s.step_cost_by_drafts;
    SpecFakeExecutor* x = exec.get();
    std::unique_ptr<Engine> e = make_engine(s, std::move(exec));
    for (const EngineRequest& r : reqs) e->add_request(r);
    Collected c = run(*e);
    if (k == 0) {
      p.plain = std::move(c);
      p.plain_rows = x->rows;
    } else {
      p.spec = std::move(c);
      p.spec_rows = x->rows;
      p.stats = e->scheduler().spec_decode_stats();
      p.cost = e->scheduler().spec_cost_model().stats();
    }
  }
  return p;
}

void expect_same(const Pair& p) {
  EXPECT_EQ(p.plain.tokens, p.spec.tokens);
  EXPECT_EQ(p.plain.reasons, p.spec.reasons);
}

TEST(SpecDecodeEngine, RepeatingOutputAcceptsDraftsAndMatchesThePlainRunAndTheReference) {
  const Ids prompt = prompt_of(1, 10);
  const Pair p = run_both({.k = 4}, {request("a", prompt, 40)});
  expect_same(p);
  EXPECT_EQ(p.spec.tokens.at("a/0"), FakeModel::reference(prompt, 40, kVocab, copy_back));
  // The accept path ran, and it saved steps: 40 tokens in far fewer than 40 decode steps.
  EXPECT_GT(p.stats.num_accepted_tokens, 20);
  EXPECT_EQ(p.stats.num_accepted_tokens, p.stats.num_draft_tokens);  // copy_back: every draft right
  EXPECT_LT(p.spec.steps, p.plain.steps / 2);
  ASSERT_FALSE(p.stats.accepted_per_pos.empty());
  EXPECT_GT(p.stats.accepted_per_pos[0], 0);
}

TEST(SpecDecodeEngine, RejectedDraftsRollBackAndChangeNothing) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(request("r" + std::to_string(i), prompt_of(i, 6 + 2 * i), 30 + i));
  const Pair p = run_both({.predict = mostly_copy, .k = 3}, reqs);
  expect_same(p);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(p.spec.tokens.at("r" + std::to_string(i) + "/0"),
              FakeModel::reference(prompt_of(i, 6 + 2 * i), 30 + i, kVocab, mostly_copy));
  EXPECT_GT(p.stats.num_accepted_tokens, 0);
  EXPECT_LT(p.stats.num_accepted_tokens, p.stats.num_draft_tokens);  // rejections happened too
}

TEST(SpecDecodeEngine, BatchedChunkedAndPrefixCachedOutputsAreUnchanged) {
  // Shared 12-token prefix (three blocks) so later requests hit the cache, long prompts chunked
  // by the 8-token threshold, six requests decoding together under a 24-token budget.
  std::vector<EngineRequest> reqs;
  const Ids shared = prompt_of(9, 12);
  for (int i = 0; i < 6; ++i) {
    Ids prompt = shared;
    const Ids tail = prompt_of(i, 3 + 4 * i);
    prompt.insert(prompt.end(), tail.begin(), tail.end());
    reqs.push_back(request("b" + std::to_string(i), prompt, 25));
  }
  const Pair p = run_both({.predict = mostly_copy, .k = 5, .budget = 24}, reqs);
  expect_same(p);
  EXPECT_GT(p.stats.num_accepted_tokens, 0);
  // Run the same requests again on the speculating engine so they start from prefix hits of
  // blocks that speculation published: still the reference.
  std::unique_ptr<Engine> e = make_engine({.predict = mostly_copy, .k = 5, .budget = 24});
  for (const EngineRequest& r : reqs) e->add_request(r);
  run(*e);
  for (EngineRequest r : reqs) {
    r.request_id += "-again";
    e->add_request(r);
  }
  const Collected again = run(*e);
  for (const EngineRequest& r : reqs)
    EXPECT_EQ(again.tokens.at(r.request_id + "-again/0"), p.plain.tokens.at(r.request_id + "/0")) << r.request_id;
  EXPECT_GT(e->scheduler().kv_cache_manager().prefix_cache_stats().hit_tokens, 0);
}

TEST(SpecDecodeEngine, PreemptionInATinyPoolKeepsOutputsUnchanged) {
  // 14 blocks of 4 tokens for four requests of up to 10 + 30 tokens: they preempt each other.
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 4; ++i) reqs.push_back(request("p" + std::to_string(i), prompt_of(i + 3, 10), 30));
  const Pair p = run_both({.predict = mostly_copy, .k = 4, .num_blocks = 14}, reqs);
  expect_same(p);
  EXPECT_GT(p.stats.num_accepted_tokens, 0);
}

TEST(SpecDecodeEngine, SeededSamplingIsIdenticalWithAndWithoutDrafts) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 4; ++i) {
    EngineRequest r = request("s" + std::to_string(i), prompt_of(i, 8), 40);
    r.params.temperature = 0.8f;
    r.params.top_k = 20;
    r.params.repetition_penalty = 1.1f;
    r.params.seed = 77 + i;
    r.params.logprobs = 2;
    reqs.push_back(r);
  }
  const Pair p = run_both({.predict = copy_back, .mode = Logits::Soft, .k = 3}, reqs);
  expect_same(p);
  EXPECT_GT(p.stats.num_accepted_tokens, 0);
  EXPECT_LT(p.stats.num_accepted_tokens, p.stats.num_draft_tokens);
  for (const auto& [id, lp] : p.plain.logprobs) {
    const auto& other = p.spec.logprobs.at(id);
    ASSERT_EQ(lp.size(), other.size()) << id;
    for (size_t i = 0; i < lp.size(); ++i) {
      EXPECT_EQ(lp[i].token_id, other[i].token_id) << id << " token " << i;
      EXPECT_EQ(lp[i].logprob, other[i].logprob) << id << " token " << i;
      ASSERT_EQ(lp[i].top_logprobs.size(), other[i].top_logprobs.size());
      for (size_t j = 0; j < lp[i].top_logprobs.size(); ++j)
        EXPECT_EQ(lp[i].top_logprobs[j].logprob, other[i].top_logprobs[j].logprob);
    }
  }
}

TEST(SpecDecodeEngine, NGreaterThanOneSequencesAreEachUnchanged) {
  // n = 3 seeded sequences (seeds 5, 6, 7) share the prompt; each speculates on its own.
  EngineRequest r = request("n", prompt_of(6, 9), 30);
  r.params.n = 3;
  r.params.temperature = 0.7f;
  r.params.seed = 5;
  const Pair p = run_both({.predict = copy_back, .mode = Logits::Soft, .k = 4}, {r});
  expect_same(p);
  EXPECT_EQ(p.spec.tokens.size(), 3u);
  EXPECT_GT(p.stats.num_accepted_tokens, 0);
}

TEST(SpecDecodeEngine, GrammarRequestsSpeculateWithUnchangedOutput) {
  // Token t spells one letter; the grammar allows a run of a|b|c. copy_back repeats the prompt's
  // [a b c] cycle, which the proposer drafts and the grammar allows: the drafts are accepted
  // under the grammar's masks (engine/spec_grammar.h; tests/engine/spec_grammar_test.cpp covers
  // forbidden drafts), and the output is unchanged.
  std::vector<std::string> letters;
  for (int i = 0; i < kVocab - 1; ++i) letters.push_back(std::string(1, char('a' + i % 26)));
  auto vocab = structured::TokenVocab::from_strings(letters, kVocab, {kVocab - 1});
  structured::Grammar g;
  g.root = structured::compile_regex("[abc]{12}", structured::RegexMode::FullMatch, false);
  EngineRequest r = request("g", {0, 1, 2, 0, 1, 2, 0, 1, 2}, 20);
  r.params.ignore_eos = false;
  r.grammar = std::make_shared<const structured::CompiledGrammar>(g, vocab);
  const Pair p = run_both({.k = 4}, {r});
  expect_same(p);
  EXPECT_EQ(p.spec.tokens.at("g/0").size(), 13u);  // twelve letters and eos
  EXPECT_GT(p.stats.num_accepted_tokens, 6);
  EXPECT_LT(p.spec.steps, p.plain.steps);
}

TEST(SpecDecodeEngine, MaxTokensInsideAnAcceptedRunCutsThere) {
  // copy_back accepts every draft: with k 8 the run would overshoot every max_tokens below.
  for (int32_t max_tokens : {1, 2, 5, 7, 11}) {
    const Pair p = run_both({.k = 8}, {request("m", prompt_of(2, 9), max_tokens)});
    expect_same(p);
    EXPECT_EQ(int32_t(p.spec.tokens.at("m/0").size()), max_tokens);
    EXPECT_EQ(p.spec.reasons.at("m/0"), FinishReason::Length);
  }
}

TEST(SpecDecodeEngine, StopTokenAndEosInsideAnAcceptedRunCutThere) {
  const Ids prompt = prompt_of(4, 9);
  const Ids ref = FakeModel::reference(prompt, 30, kVocab, copy_back);
  // A stop token that first appears some tokens into the output (inside a drafted run).
  EngineRequest stop = request("st", prompt, 30);
  stop.params.stop_token_ids = {ref[7]};
  const size_t first = size_t(std::find(ref.begin(), ref.end(), ref[7]) - ref.begin());
  const Pair p = run_both({.k = 6}, {stop});
  expect_same(p);
  EXPECT_EQ(p.spec.tokens.at("st/0"), Ids(ref.begin(), ref.begin() + std::ptrdiff_t(first) + 1));
  EXPECT_EQ(p.spec.reasons.at("st/0"), FinishReason::Stop);

  // EOS inside the run: the prompt ends with a cycle [3 8 eos] twice, so the output copies
  // 3, 8, eos; the second step drafts [8 eos ...] from the prompt and accepts through eos.
  Ids eos_prompt = prompt_of(5, 6);
  eos_prompt.insert(eos_prompt.end(), {3, 8, kVocab - 1, 3, 8, kVocab - 1});
  EngineRequest eos = request("eos", eos_prompt, 30);
  eos.params.ignore_eos = false;
  const Pair q = run_both({.k = 6}, {eos});
  expect_same(q);
  EXPECT_EQ(q.spec.reasons.at("eos/0"), FinishReason::Stop);
  EXPECT_EQ(q.spec.tokens.at("eos/0"), (Ids{3, 8, kVocab - 1}));
  EXPECT_GE(q.stats.num_accepted_tokens, 1);  // eos came out of an accepted run
  EXPECT_EQ(q.spec.steps, 3);  // two prefill chunks (8 + 4 tokens, then 3), one verify (8, eos)
}

// Deviates from whatever the n-gram proposer (the engine's window, 2..4) would draft next, so
// every draft is rejected; copies 3 back (copy_back) when there is no proposal.
int32_t anti_ngram(std::span<const int32_t> ctx, int32_t vocab) {
  std::vector<int32_t> draft;
  NgramProposer(2, 4).propose(ctx, 1, draft);
  return draft.empty() ? copy_back(ctx, vocab) : (draft[0] + 1) % (vocab - 1);
}

TEST(SpecDecodeEngine, ARequestWhoseDraftsAreAllRejectedStopsSpeculating) {
  const Ids prompt = prompt_of(3, 8);
  constexpr int32_t kTokens = 80;
  const Pair p = run_both({.predict = anti_ngram, .k = 4}, {request("x", prompt, kTokens)});
  expect_same(p);
  EXPECT_EQ(p.stats.num_accepted_tokens, 0);
  // Without the throttle every output position with a proposal would be one verify step.
  Ids ctx = prompt;
  int64_t proposals = 0;
  std::vector<int32_t> draft;
  for (int32_t i = 0; i < kTokens - 1; ++i) {
    ctx.push_back(anti_ngram(ctx, kVocab));
    NgramProposer(2, 4).propose(ctx, 1, draft);
    proposals += !draft.empty();
  }
  ASSERT_GT(proposals, 30) << "the test needs a context the proposer keeps matching";
  EXPECT_GT(p.stats.num_drafts, 0);
  EXPECT_LT(p.stats.num_drafts * 3, proposals);
  // Extra logits rows (the verify cost) stay a small fraction of the plain run's.
  EXPECT_LE(p.spec_rows, p.plain_rows * 13 / 10);
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

// The measured cost model (engine/spec_cost_model.h) over a fake model whose steps take a
// synthetic time. Drafts of the copying model are always right, so only the costs decide.
// The margins are wide (4x, 1x): the host's noise cannot flip the choice.
TEST(SpecDecodeEngine, TheCostModelStopsSpeculatingWhereVerifyingCostsMoreThanItEmits) {
  const Ids prompt = prompt_of(5, 8);
  // An MoE-like verify: (rows)^2 ms, so k drafts cost (k + 1)^2 for at most k + 1 tokens.
  ::pypto::Setup s{.predict = copy_back, .k = 3, .cost_model = true};
  s.step_cost = [](int64_t rows) { return std::chrono::microseconds(1000 * rows * rows); };
  const Pair p = run_both(s, {request("x", prompt, 80)});
  expect_same(p);
  // The k = 1 exploration, maybe a decision on the prior, probes 32 and 64 steps apart.
  EXPECT_LE(p.stats.num_drafts, 6) << "verify steps";
  EXPECT_GT(p.stats.num_drafts, 0) << "it never explored";
}

TEST(SpecDecodeEngine, TheCostModelKeepsSpeculatingWhereVerifyingIsNearlyFree) {
  const Ids prompt = prompt_of(5, 8);
  ::pypto::Setup s{.predict = copy_back, .k = 3, .cost_model = true};
  s.step_cost = [](int64_t) { return std::chrono::microseconds(2000); };  // dense: rows are free
  const Pair p = run_both(s, {request("x", prompt, 80), request("y", prompt_of(6, 9), 80)});
  expect_same(p);
  EXPECT_GT(p.stats.num_accepted_tokens, 60);
  EXPECT_LT(p.spec.steps * 10, p.plain.steps * 6);
}

// What the cost model reports (/metrics pypto:spec_decode_*, the --profile section): a request whose
// drafts are all rejected leaves it decoding plainly after the warm-up, a copying one speculating.
TEST(SpecDecodeEngine, TheCostModelReportsSpeculationOffForARequestThatRejectsEverything) {
  ::pypto::Setup s{.predict = anti_ngram, .k = 3, .cost_model = true};
  // A draft row costs 30 % of a plain step (a little acceptance would not pay for it).
  s.step_cost_by_drafts = [](int64_t drafts) { return std::chrono::microseconds(1000 + 300 * drafts); };
  const Pair p = run_both(s, {request("x", prompt_of(3, 8), 80)});
  expect_same(p);
  EXPECT_EQ(p.stats.num_accepted_tokens, 0);
  EXPECT_FALSE(p.cost.speculating);
  EXPECT_EQ(p.cost.last_k, 0);
  EXPECT_GT(p.cost.steps_plain, p.cost.steps_speculating);
  EXPECT_GT(p.cost.plain_step_s, 0);
  EXPECT_LT(p.cost.spec_tokens_per_s, p.cost.plain_tokens_per_s * (1 + SpecCostModel::kMargin));
}

TEST(SpecDecodeEngine, TheCostModelReportsSpeculationOnForACopyingRequest) {
  ::pypto::Setup s{.predict = copy_back, .k = 3, .cost_model = true};
  s.step_cost_by_drafts = [](int64_t drafts) { return std::chrono::microseconds(1000 + 300 * drafts); };
  const Pair p = run_both(s, {request("x", prompt_of(5, 8), 80)});
  expect_same(p);
  EXPECT_TRUE(p.cost.speculating);
  EXPECT_GT(p.cost.last_k, 0);  // the last step's k is bounded by the tokens left
  EXPECT_GT(p.cost.chosen_k[3], 10);
  EXPECT_GT(p.cost.spec_tokens_per_s, p.cost.plain_tokens_per_s * 1.5);
}

// A copying request and one whose drafts are all rejected in one batch: the copying one keeps
// drafting while the other decodes plainly in the same steps, and both outputs are unchanged.
int32_t copy_or_anti(std::span<const int32_t> ctx, int32_t vocab) {
  return ctx[0] == prompt_of(3, 8)[0] ? anti_ngram(ctx, vocab) : copy_back(ctx, vocab);
}

TEST(SpecDecodeEngine, TheCostModelChoosesKPerRequestInAMixedBatch) {
  ::pypto::Setup s{.predict = copy_or_anti, .k = 3, .cost_model = true};
  // Every draft row costs 30 % of a plain step: the copying request's drafts pay for themselves,
  // the rejecting one's (a few tenths of a token each) do not.
  s.step_cost_by_drafts = [](int64_t drafts) { return std::chrono::microseconds(1000 + 300 * drafts); };
  ASSERT_NE(prompt_of(3, 8)[0], prompt_of(5, 8)[0]);
  const Pair p = run_both(s, {request("anti", prompt_of(3, 8), 24), request("copy", prompt_of(5, 8), 80)});
  expect_same(p);
  EXPECT_GT(p.stats.num_accepted_tokens, 40);  // the copying request's
  // While both run (the first ~20 steps), the copying request drafts 3 and the rejecting one
  // nothing in the same steps: of ~40 request-steps, ~20 at k = 3 and ~20 at k = 0, and only
  // the exploration step and probes are plain.
  EXPECT_GT(p.cost.chosen_k[3], 12);
  EXPECT_GT(p.cost.chosen_k[0], 12);
  EXPECT_LE(p.cost.steps_plain, 4);
}

}  // namespace
}  // namespace pypto
