#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/engine_loop.h"
#include "fake_model.h"
#include "structured/regex.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
using testing::FakeModel;

constexpr int32_t kVocab = 50;

// Peaked: all mass on FakeModel::next_token (greedy and sampled agree). Flat: every token equally
// likely, so tokens come only from the request's seeded draws.
enum class Logits { Peaked, Flat };

class FakeExecutor : public ModelExecutor {
 public:
  FakeExecutor(int32_t num_blocks, int32_t block_size, Logits mode, int fail_on_step = -1)
      : model_(num_blocks, block_size, kVocab), mode_(mode), fail_on_step_(fail_on_step) {}
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    if (++calls_ == fail_on_step_) fail("fake model: device lost");
    // From the second step on, wait until the test opens the gate (when it holds one).
    if (gate_ && calls_ >= 2)
      while (!gate_->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    out.vocab_size = kVocab;
    out.logits = model_.execute_logits(so);
    if (mode_ == Logits::Flat) std::fill(out.logits.begin(), out.logits.end(), 0.0f);
  }

 private:
  FakeModel model_;
  Logits mode_;
  int fail_on_step_;
  int calls_ = 0;

 public:
  std::shared_ptr<std::atomic<bool>> gate_;
};

EngineConfig engine_config(int32_t num_blocks = 64) {
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = 32;
  c.scheduler.long_prefill_token_threshold = 8;
  c.scheduler.max_model_len = 64;
  c.cache.block_size = 4;
  c.cache.num_blocks = num_blocks;
  c.vocab_size = kVocab;
  return c;
}

std::unique_ptr<Engine> make_engine(Logits mode = Logits::Peaked, int fail_on_step = -1, int32_t num_blocks = 64) {
  EngineConfig c = engine_config(num_blocks);
  return std::make_unique<Engine>(c, std::make_unique<FakeExecutor>(num_blocks, 4, mode, fail_on_step));
}

EngineRequest greedy_request(const std::string& id, Ids prompt, int32_t max_tokens) {
  EngineRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  return r;
}

struct Collected {
  std::map<std::pair<std::string, int32_t>, Ids> tokens;
  std::map<std::pair<std::string, int32_t>, FinishReason> reasons;
  std::map<std::string, std::string> errors;
  std::map<std::string, bool> finished;
  void add(const RequestOutput& o) {
    Ids& t = tokens[{o.request_id, o.index}];
    t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    if (o.finish_reason) reasons[{o.request_id, o.index}] = *o.finish_reason;
    if (!o.error.empty()) errors[o.request_id] = o.error;
    if (o.request_finished) finished[o.request_id] = true;
  }
};

Collected run(Engine& e, int max_steps = 1000) {
  Collected c;
  for (int i = 0; i < max_steps && e.has_unfinished_requests(); ++i)
    for (const RequestOutput& o : e.step()) c.add(o);
  return c;
}

Ids prompt_of(int seed, int len) {
  Ids p;
  for (int i = 0; i < len; ++i) p.push_back((seed * 7 + i * 3) % kVocab);
  return p;
}

TEST(Engine, GreedyOutputsMatchTheReference) {
  auto e = make_engine();
  for (int i = 0; i < 5; ++i) e->add_request(greedy_request("r" + std::to_string(i), prompt_of(i, 5 + 3 * i), 6));
  Collected c = run(*e);
  for (int i = 0; i < 5; ++i) {
    const std::string id = "r" + std::to_string(i);
    EXPECT_EQ((c.tokens[{id, 0}]), FakeModel::reference(prompt_of(i, 5 + 3 * i), 6, kVocab)) << id;
    EXPECT_EQ((c.reasons[{id, 0}]), FinishReason::Length);
    EXPECT_TRUE(c.finished[id]);
  }
  EXPECT_EQ(e->stats().generated_tokens, 30);
  EXPECT_FALSE(e->has_unfinished_requests());
}

TEST(Engine, SeededSamplingDoesNotDependOnTheBatch) {
  EngineRequest r;
  r.request_id = "s";
  r.prompt_token_ids = prompt_of(1, 9);
  r.params.seed = 1234;
  r.params.max_tokens = 12;
  auto alone = make_engine(Logits::Flat);
  alone->add_request(r);
  const Ids a = run(*alone).tokens[{"s", 0}];

  auto busy = make_engine(Logits::Flat);
  for (int i = 0; i < 4; ++i) {
    EngineRequest other = r;
    other.request_id = "o" + std::to_string(i);
    other.params.seed.reset();
    other.prompt_token_ids = prompt_of(i + 5, 3 + i);
    busy->add_request(other);
  }
  busy->add_request(r);
  const Ids b = run(*busy).tokens[{"s", 0}];
  EXPECT_EQ(a.size(), 12u);
  EXPECT_EQ(a, b);
  EXPECT_GT(std::set<int32_t>(a.begin(), a.end()).size(), 3u);  // really sampled
}

TEST(Engine, NSequencesDrawFromDistinctSeeds) {
  EngineRequest r;
  r.request_id = "n";
  r.prompt_token_ids = prompt_of(2, 8);
  r.params.seed = 7;
  r.params.n = 3;
  r.params.max_tokens = 10;
  auto e = make_engine(Logits::Flat);
  e->add_request(r);
  Collected c = run(*e);
  EXPECT_TRUE(c.finished["n"]);
  ASSERT_EQ(c.tokens.size(), 3u);
  EXPECT_NE((c.tokens[{"n", 0}]), (c.tokens[{"n", 1}]));
  EXPECT_NE((c.tokens[{"n", 1}]), (c.tokens[{"n", 2}]));
  // Sequence 1 of seed 7 is what a lone request with seed 8 draws.
  EngineRequest single = r;
  single.params.n = 1;
  single.params.seed = 8;
  auto e2 = make_engine(Logits::Flat);
  e2->add_request(single);
  EXPECT_EQ((run(*e2).tokens[{"n", 0}]), (c.tokens[{"n", 1}]));
}

TEST(Engine, FinishingOneSequenceLeavesTheOthers) {
  EngineRequest r;
  r.request_id = "n";
  r.prompt_token_ids = prompt_of(2, 8);
  r.params.seed = 7;
  r.params.n = 3;
  r.params.max_tokens = 10;
  auto e = make_engine(Logits::Flat);
  e->add_request(r);
  e->step();
  EXPECT_TRUE(e->finish_request("n", FinishReason::Stop, 1));  // a stop string in sequence 1
  Collected c = run(*e);
  EXPECT_EQ((c.reasons[{"n", 1}]), FinishReason::Stop);
  EXPECT_EQ((c.tokens[{"n", 1}]).size(), 0u);  // its first token came from the step above
  EXPECT_EQ((c.reasons[{"n", 0}]), FinishReason::Length);
  EXPECT_EQ((c.tokens[{"n", 0}]).size(), 9u);
  EXPECT_EQ((c.reasons[{"n", 2}]), FinishReason::Length);
  EXPECT_TRUE(c.finished["n"]);
}

TEST(Engine, AbortFreesBlocksWithinOneStep) {
  auto e = make_engine();
  e->add_request(greedy_request("a", prompt_of(1, 10), 20));
  e->add_request(greedy_request("b", prompt_of(2, 10), 20));
  e->step();
  const auto& pool = e->scheduler().kv_cache_manager().block_pool();
  EXPECT_EQ(pool.num_free_blocks(), 64 - 2 - 2);  // 8 of 10 prompt tokens each (threshold 8)
  EXPECT_TRUE(e->finish_request("a"));
  EXPECT_EQ(pool.num_free_blocks(), 64 - 2);
  EXPECT_FALSE(e->finish_request("unknown"));
  const auto outs = e->step();
  ASSERT_GE(outs.size(), 1u);
  EXPECT_EQ(outs[0].request_id, "a");
  EXPECT_EQ(outs[0].finish_reason, FinishReason::Abort);
  EXPECT_TRUE(outs[0].request_finished);
  Collected c = run(*e);
  EXPECT_EQ((c.tokens[{"b", 0}]).size(), 19u);  // one token came in the step above
}

TEST(Engine, FailedStepFinishesItsRequestsWithTheError) {
  auto e = make_engine(Logits::Peaked, /*fail_on_step=*/2);
  e->add_request(greedy_request("a", prompt_of(1, 4), 5));
  Collected c = run(*e);
  EXPECT_EQ((c.reasons[{"a", 0}]), FinishReason::Error);
  EXPECT_EQ(c.errors["a"], "fake model: device lost");
  EXPECT_EQ((c.tokens[{"a", 0}]).size(), 1u);
  EXPECT_EQ(e->stats().failed_steps, 1);
  EXPECT_EQ(e->scheduler().kv_cache_manager().block_pool().num_free_blocks(), 64);
  // The engine keeps serving.
  e->add_request(greedy_request("b", prompt_of(2, 4), 3));
  c = run(*e);
  EXPECT_EQ((c.tokens[{"b", 0}]), FakeModel::reference(prompt_of(2, 4), 3, kVocab));
}

TEST(Engine, ValidationErrorsNameTheProblem) {
  auto e = make_engine();
  auto error_of = [&](const EngineRequest& r) -> std::string {
    try {
      e->add_request(r);
    } catch (const Error& err) {
      return err.what();
    }
    return "";
  };
  EngineRequest r = greedy_request("x", {1, 2, 50}, 4);
  EXPECT_EQ(error_of(r), "request x: prompt token 2 = 50 is outside the vocabulary [0, 50)");
  r = greedy_request("x", {1, 2}, 4);
  r.params.top_p = 0.0f;
  EXPECT_EQ(error_of(r), "sampling parameter 'top_p' = 0 is out of range: allowed 0 < top_p <= 1");
  r = greedy_request("x", prompt_of(1, 60), 10);
  EXPECT_EQ(error_of(r), "request x: prompt of 60 tokens + max_tokens 10 = 70 tokens exceeds --max-model-len 64");
  r = greedy_request("x", {1, 2}, 4);
  EXPECT_EQ(error_of(r), "");
  EXPECT_EQ(error_of(r), "request x: a request with this id is already running");
}

TEST(Engine, PreemptionUnderATinyPoolKeepsOutputsExact) {
  auto e = make_engine(Logits::Peaked, -1, /*num_blocks=*/12);
  for (int i = 0; i < 6; ++i) e->add_request(greedy_request("r" + std::to_string(i), prompt_of(i, 12), 20));
  Collected c = run(*e, 5000);
  for (int i = 0; i < 6; ++i) {
    const std::string id = "r" + std::to_string(i);
    EXPECT_EQ((c.tokens[{id, 0}]), FakeModel::reference(prompt_of(i, 12), 20, kVocab)) << id;
  }
  EXPECT_GT(e->scheduler().num_preemptions(), 0);
}

TEST(EngineLoop, StreamsOutputsToEachRequest) {
  EngineLoop loop(make_engine());
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 4; ++i)
    streams.push_back(loop.add_request(greedy_request("r" + std::to_string(i), prompt_of(i, 6 + i), 8)));
  std::vector<std::thread> readers;
  std::vector<Ids> got(4);
  for (int i = 0; i < 4; ++i)
    readers.emplace_back([&, i] {
      while (auto o = streams[size_t(i)]->next()) got[size_t(i)].insert(got[size_t(i)].end(), o->new_token_ids.begin(), o->new_token_ids.end());
    });
  for (auto& t : readers) t.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(got[size_t(i)], FakeModel::reference(prompt_of(i, 6 + i), 8, kVocab)) << i;
    EXPECT_TRUE(streams[size_t(i)]->finished());
  }
  EXPECT_EQ(loop.num_active_requests(), 0u);
}

TEST(EngineLoop, ValidationThrowsOnTheCallerAndAbortEndsTheStream) {
  auto gate = std::make_shared<std::atomic<bool>>(false);
  auto executor = std::make_unique<FakeExecutor>(64, 4, Logits::Peaked);
  executor->gate_ = gate;
  EngineLoop loop(std::make_unique<Engine>(engine_config(), std::move(executor)));
  EngineRequest bad = greedy_request("bad", {}, 4);
  EXPECT_THROW(loop.add_request(bad), Error);
  auto s = loop.add_request(greedy_request("long", prompt_of(3, 8), 50));
  auto first = s->next();
  ASSERT_TRUE(first.has_value());
  // The second step is held in the model until the abort is queued: the request cannot finish
  // on its own first.
  loop.finish_request("long", FinishReason::Abort);
  gate->store(true);
  std::optional<FinishReason> reason;
  while (auto o = s->next())
    if (o->finish_reason) reason = o->finish_reason;
  EXPECT_EQ(reason, FinishReason::Abort);
  EXPECT_TRUE(s->finished());
}

TEST(EngineLoop, ShutdownAbortsInFlightRequests) {
  auto loop = std::make_unique<EngineLoop>(make_engine());
  auto s = loop->add_request(greedy_request("a", prompt_of(3, 8), 50));
  loop->shutdown();
  std::optional<FinishReason> reason;
  while (auto o = s->next())
    if (o->finish_reason) reason = o->finish_reason;
  ASSERT_TRUE(reason.has_value());
  EXPECT_TRUE(*reason == FinishReason::Abort || *reason == FinishReason::Length);
  EXPECT_THROW(loop->add_request(greedy_request("b", {1}, 1)), Error);
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

TEST(EngineLoop, StatsAndPendingTokensForRouting) {
  auto gate = std::make_shared<std::atomic<bool>>(false);
  auto executor = std::make_unique<FakeExecutor>(64, 4, Logits::Peaked);
  executor->gate_ = gate;
  EngineLoop loop(std::make_unique<Engine>(engine_config(), std::move(executor)));
  auto a = loop.add_request(greedy_request("a", prompt_of(1, 8), 50));
  ASSERT_TRUE(a->next().has_value());  // step 1 done; step 2 waits at the gate
  EngineLoopStats st = loop.stats();
  EXPECT_TRUE(st.alive);
  EXPECT_EQ(st.num_running, 1);
  EXPECT_EQ(st.pending_tokens, 49);  // prompt computed, 49 of 50 tokens to go
  EXPECT_EQ(st.num_blocks, 64);
  EXPECT_EQ(st.num_free_blocks, 62);  // 9 tokens in blocks of 4 (the 9th's block is reserved next step)
  EXPECT_EQ(st.engine.steps, 1);
  EXPECT_EQ(st.engine.generated_tokens, 1);
  // A queued request counts prompt + max_tokens until the engine takes it.
  auto b = loop.add_request(greedy_request("b", prompt_of(2, 5), 10));
  EXPECT_EQ(loop.num_pending_tokens(), 49 + 15);
  gate->store(true);
  while (a->next()) {
  }
  while (b->next()) {
  }
  st = loop.stats();
  EXPECT_EQ(st.num_running, 0);
  EXPECT_EQ(st.num_waiting, 0);
  EXPECT_EQ(st.pending_tokens, 0);
  EXPECT_EQ(st.num_free_blocks, 64);
  EXPECT_DOUBLE_EQ(st.kv_usage, 0.0);
  EXPECT_EQ(st.engine.generated_tokens, 60);
  EXPECT_GT(st.engine.execute_seconds, 0.0);
  loop.shutdown();
  EXPECT_FALSE(loop.is_alive());
  try {
    loop.add_request(greedy_request("c", {1}, 1));
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "request c: the engine loop has stopped: shut down");
  }
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

TEST(Engine, NSequencesShareThePromptThroughThePrefixCache) {
  EngineRequest r = greedy_request("n", prompt_of(4, 20), 6);
  r.params.n = 4;
  auto e = make_engine();
  e->add_request(r);
  EXPECT_EQ(e->num_pending_tokens(), 4 * (20 + 6));
  Collected c = run(*e);
  EXPECT_TRUE(c.finished["n"]);
  const Ids want = FakeModel::reference(prompt_of(4, 20), 6, kVocab);
  for (int32_t k = 0; k < 4; ++k) EXPECT_EQ((c.tokens[{"n", k}]), want) << k;
  // Sequences 1..3 waited for sequence 0's prompt and hit its 4 full blocks (not the 5th: the
  // last prompt token is always computed).
  const PrefixCacheStats& st = e->scheduler().kv_cache_manager().prefix_cache_stats();
  EXPECT_EQ(st.requests, 4);
  EXPECT_EQ(st.hit_tokens, 3 * 16);
}

TEST(Engine, AbortingSequenceZeroReleasesTheDeferredOnes) {
  EngineRequest r = greedy_request("n", prompt_of(4, 20), 6);
  r.params.n = 3;
  auto e = make_engine();
  e->add_request(r);
  EXPECT_TRUE(e->finish_request("n", FinishReason::Abort, 0));  // before any step
  Collected c = run(*e);
  EXPECT_EQ((c.reasons[{"n", 0}]), FinishReason::Abort);
  EXPECT_EQ((c.reasons[{"n", 1}]), FinishReason::Length);
  EXPECT_EQ((c.tokens[{"n", 2}]).size(), 6u);
  EXPECT_TRUE(c.finished["n"]);
  // And aborting the whole request finishes deferred sequences too.
  e->add_request(r);
  EXPECT_TRUE(e->finish_request("n"));
  c = run(*e);
  EXPECT_EQ(c.reasons.size(), 3u);
  EXPECT_TRUE(c.finished["n"]);
  EXPECT_FALSE(e->has_unfinished_requests());
}

}  // namespace
}  // namespace pypto

// The timestamps behind the server's queue / prefill / decode / inference histograms
// (RequestTimes): arrival from the request, first scheduling kept across preemption, first and
// last token from the steps that produced them.
namespace pypto {
namespace {

using Clock = std::chrono::steady_clock;

TEST(Engine, TimesFollowQueueingThenTheSteps) {
  EngineConfig c = engine_config();
  c.scheduler.max_num_seqs = 1;  // b waits until a has finished
  Engine e(c, std::make_unique<FakeExecutor>(64, 4, Logits::Peaked));
  const Clock::time_point before = Clock::now();
  EngineRequest a = greedy_request("a", prompt_of(1, 6), 4);
  a.arrival_time = before - std::chrono::seconds(10);  // stamped by the engine loop in practice
  e.add_request(a);
  e.add_request(greedy_request("b", prompt_of(2, 6), 3));  // unstamped: the engine stamps it
  std::map<std::string, std::vector<RequestTimes>> seen;
  for (int i = 0; i < 100 && e.has_unfinished_requests(); ++i)
    for (const RequestOutput& o : e.step()) seen[o.request_id].push_back(o.times);
  ASSERT_EQ(seen["a"].size(), 4u);
  ASSERT_EQ(seen["b"].size(), 3u);
  for (const auto& [id, outs] : seen) {
    const RequestTimes& first = outs.front();
    const RequestTimes& last = outs.back();
    ASSERT_TRUE(last.first_scheduled && last.first_token && last.last_token) << id;
    EXPECT_LE(last.arrival, *last.first_scheduled) << id;
    EXPECT_LE(*last.first_scheduled, *last.first_token) << id;
    EXPECT_LT(*last.first_token, *last.last_token) << id;  // 3 or 4 tokens: later steps
    EXPECT_EQ(first.first_token, first.last_token) << id;  // the first output is the first token
    for (size_t k = 1; k < outs.size(); ++k) {
      EXPECT_EQ(outs[k].first_scheduled, first.first_scheduled) << id;
      EXPECT_EQ(outs[k].first_token, first.first_token) << id;
      EXPECT_GT(*outs[k].last_token, *outs[k - 1].last_token) << id;  // one step per token
    }
  }
  EXPECT_EQ(seen["a"].back().arrival, a.arrival_time);
  EXPECT_GE(seen["b"].back().arrival, before);
  // Queue time: a was scheduled at once (its 10 s are the loop's wait); b only after a's last token.
  EXPECT_GE(*seen["a"].back().first_scheduled - seen["a"].back().arrival, std::chrono::seconds(10));
  EXPECT_GE(*seen["b"].back().first_scheduled, *seen["a"].back().last_token);
}

TEST(Engine, PreemptionKeepsTheFirstScheduling) {
  auto e = make_engine(Logits::Peaked, -1, /*num_blocks=*/12);
  for (int i = 0; i < 6; ++i) e->add_request(greedy_request("r" + std::to_string(i), prompt_of(i, 12), 20));
  std::map<std::string, std::vector<RequestTimes>> seen;
  std::map<std::string, int32_t> preemptions;
  bool preempted_after_a_token = false;  // the case a "latest scheduling" bug would break
  for (int i = 0; i < 5000 && e->has_unfinished_requests(); ++i) {
    for (const RequestOutput& o : e->step()) seen[o.request_id].push_back(o.times);
    for (int r = 0; r < 6; ++r) {
      const std::string id = "r" + std::to_string(r);
      const Request* req = e->scheduler().get_request(id);
      if (!req) continue;
      if (req->num_preemptions > preemptions[id] && !seen[id].empty()) preempted_after_a_token = true;
      preemptions[id] = req->num_preemptions;
    }
  }
  EXPECT_GT(e->scheduler().num_preemptions(), 0);
  EXPECT_TRUE(preempted_after_a_token);
  for (const auto& [id, outs] : seen) {
    ASSERT_EQ(outs.size(), 20u) << id;
    for (const RequestTimes& t : outs) {
      ASSERT_TRUE(t.first_scheduled && t.first_token) << id;
      EXPECT_EQ(t.first_scheduled, outs.front().first_scheduled) << id;
      EXPECT_LE(*t.first_scheduled, *t.first_token) << id;
    }
  }
}

TEST(EngineLoop, StampsArrivalWhenTheRequestIsAdded) {
  EngineLoop loop(make_engine());
  const Clock::time_point before = Clock::now();
  auto stream = loop.add_request(greedy_request("r", prompt_of(3, 5), 2));
  const Clock::time_point after_add = Clock::now();
  std::optional<RequestTimes> last;
  while (auto o = stream->next()) last = o->times;
  ASSERT_TRUE(last && last->first_scheduled && last->last_token);
  EXPECT_GE(last->arrival, before);
  EXPECT_LE(last->arrival, after_add);  // on the caller's thread, before the engine thread takes it
  EXPECT_LE(last->arrival, *last->first_scheduled);
}

}  // namespace
}  // namespace pypto

namespace pypto {
namespace {

// Token t of the fake vocabulary spells one character: letters, then digits, then punctuation;
// the last id is EOS.
std::shared_ptr<const structured::TokenVocab> fake_vocab() {
  std::vector<std::string> t;
  for (int i = 0; i < kVocab - 1; ++i)
    t.push_back(std::string(1, i < 26 ? char('a' + i) : i < 36 ? char('0' + i - 26) : "{}\":, -+.[]()"[i - 36]));
  return structured::TokenVocab::from_strings(t, kVocab, {kVocab - 1});
}

std::string spell(const Ids& ids, const structured::TokenVocab& v) {
  std::string s;
  for (int32_t id : ids) s += id == kVocab - 1 ? std::string("<eos>") : v.token_text(id);
  return s;
}

TEST(Engine, GrammarMasksEverySequenceOfARequest) {
  EngineConfig c = engine_config();
  c.eos_token_ids = {kVocab - 1};
  Engine e(c, std::make_unique<FakeExecutor>(64, 4, Logits::Flat));
  auto vocab = fake_vocab();
  structured::Grammar g;
  g.root = structured::compile_regex("-?[0-9]{2,3}", structured::RegexMode::FullMatch, false);
  auto compiled = std::make_shared<const structured::CompiledGrammar>(g, vocab);
  EngineRequest r = greedy_request("g", prompt_of(1, 6), 10);
  r.params.temperature = 1.0f;
  r.params.n = 4;
  r.params.seed = 5;
  r.grammar = compiled;
  e.add_request(r);
  EngineRequest free_text = greedy_request("free", prompt_of(1, 6), 10);
  free_text.params.temperature = 1.0f;
  free_text.params.seed = 5;
  e.add_request(free_text);
  Collected got = run(e);
  const std::regex re("-?[0-9]{2,3}(<eos>)?");
  for (int32_t k = 0; k < 4; ++k) {
    const std::string s = spell(got.tokens[{"g", k}], *vocab);
    EXPECT_TRUE(std::regex_match(s, re)) << "sequence " << k << ": " << s;
    EXPECT_EQ((got.reasons[{"g", k}]), FinishReason::Stop) << s;
  }
  // The same sampling without the grammar does not happen to follow it.
  EXPECT_FALSE(std::regex_match(spell(got.tokens[{"free", 0}], *vocab), re));
}

TEST(Engine, GrammarStartsAfterItsStartToken) {
  EngineConfig c = engine_config();
  c.eos_token_ids = {kVocab - 1};
  Engine e(c, std::make_unique<FakeExecutor>(64, 4, Logits::Peaked));
  auto vocab = fake_vocab();
  structured::Grammar g;
  g.root = structured::literal("ok");
  auto compiled = std::make_shared<const structured::CompiledGrammar>(g, vocab);
  const Ids prompt = prompt_of(2, 5);
  const Ids free_run = FakeModel::reference(prompt, 3, kVocab);  // what the model writes unconstrained
  EngineRequest r = greedy_request("t", prompt, 10);
  r.grammar = compiled;
  r.grammar_options.start_after = free_run[1];  // unconstrained up to and including token 2
  e.add_request(r);
  Collected got = run(e);
  const Ids& out = got.tokens[{"t", 0}];
  const size_t free_len = free_run[0] == free_run[1] ? 1 : 2;
  ASSERT_GE(out.size(), free_len + 3);
  EXPECT_EQ(Ids(out.begin(), out.begin() + std::ptrdiff_t(free_len)), Ids(free_run.begin(), free_run.begin() + std::ptrdiff_t(free_len)));
  EXPECT_EQ(spell(Ids(out.begin() + std::ptrdiff_t(free_len), out.end()), *vocab), "ok<eos>");
}

}  // namespace
}  // namespace pypto
