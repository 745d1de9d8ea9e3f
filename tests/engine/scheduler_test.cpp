#include <gtest/gtest.h>

#include <map>
#include <memory>

#include "core/error.h"
#include "engine/scheduler.h"
#include "fake_model.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
using testing::FakeModel;

constexpr int32_t kVocab = 1000;

Ids range(int32_t from, int32_t to) {
  Ids out;
  for (int32_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

struct Harness {
  Harness(SchedulerConfig sc, CacheConfig cc)
      : sched(sc, cc), model(cc.num_blocks, cc.block_size, kVocab) {}

  void add(const std::string& id, Ids prompt, int32_t max_tokens, Ids eos = {}) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    sched.add_request(std::make_unique<Request>(id, std::move(prompt), p, std::move(eos), 0));
    prompts[id] = sched.get_request(id)->prompt_token_ids;
    max_tokens_[id] = max_tokens;
  }

  // One step with the fake model; returns the schedule.
  SchedulerOutput step() {
    SchedulerOutput so = sched.schedule();
    const Ids tokens = model.execute(so);
    std::vector<SampledToken> sampled(so.scheduled.size());
    size_t k = 0;
    for (size_t i = 0; i < so.scheduled.size(); ++i)
      if (so.scheduled[i].samples && k < tokens.size()) sampled[i].token_id = tokens[k++];
    for (const EngineCoreOutput& o : sched.update_from_output(so, sampled)) {
      Ids& out = outputs[o.req_id];
      out.insert(out.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finish_reason) reasons[o.req_id] = *o.finish_reason;
    }
    ++steps;
    return so;
  }

  int run(int max_steps) {
    while (sched.has_unfinished_requests() && steps < max_steps) step();
    return steps;
  }

  void expect_reference_outputs() {
    for (const auto& [id, prompt] : prompts)
      EXPECT_EQ(outputs[id], FakeModel::reference(prompt, max_tokens_[id], kVocab)) << id;
  }

  Scheduler sched;
  FakeModel model;
  std::map<std::string, Ids> prompts;
  std::map<std::string, int32_t> max_tokens_;
  std::map<std::string, Ids> outputs;
  std::map<std::string, FinishReason> reasons;
  int steps = 0;
};

SchedulerConfig sched_config(int64_t budget, int64_t threshold, int32_t max_seqs = 16, int64_t max_len = 64) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.long_prefill_token_threshold = threshold;
  c.max_num_seqs = max_seqs;
  c.max_model_len = max_len;
  return c;
}

CacheConfig cache_config(int32_t num_blocks, int32_t block_size = 4, bool prefix = true) {
  CacheConfig c;
  c.num_blocks = num_blocks;
  c.block_size = block_size;
  c.enable_prefix_caching = prefix;
  return c;
}

std::string add_error(Harness& h, const std::string& id, Ids prompt, int32_t max_tokens) {
  try {
    h.add(id, std::move(prompt), max_tokens);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Scheduler, TokenBudgetChunksAndRunningFirst) {
  Harness h(sched_config(16, 2048), cache_config(100));
  h.add("r0", range(0, 10), 5);
  h.add("r1", range(100, 110), 5);
  h.add("r2", range(200, 210), 5);

  SchedulerOutput s1 = h.step();
  ASSERT_EQ(s1.scheduled.size(), 2u);
  EXPECT_EQ(s1.total_num_scheduled_tokens, 16);
  EXPECT_EQ(s1.scheduled[0].req_id, "r0");
  EXPECT_EQ(s1.scheduled[0].num_scheduled_tokens, 10);
  EXPECT_TRUE(s1.scheduled[0].is_new);
  EXPECT_EQ(s1.scheduled[0].block_ids, (Ids{0, 1, 2}));
  EXPECT_TRUE(s1.scheduled[0].samples);
  EXPECT_EQ(s1.scheduled[1].req_id, "r1");
  EXPECT_EQ(s1.scheduled[1].num_scheduled_tokens, 6);  // chunked by the budget
  EXPECT_EQ(s1.scheduled[1].block_ids, (Ids{3, 4}));
  EXPECT_FALSE(s1.scheduled[1].samples);
  EXPECT_EQ(h.sched.num_waiting(), 1u);

  // Running requests first (r0 decodes 1, r1 finishes its prompt with 4), then r2 is admitted.
  SchedulerOutput s2 = h.step();
  ASSERT_EQ(s2.scheduled.size(), 3u);
  EXPECT_EQ(s2.scheduled[0].req_id, "r0");
  EXPECT_EQ(s2.scheduled[0].num_computed_tokens, 10);
  EXPECT_EQ(s2.scheduled[0].num_scheduled_tokens, 1);
  EXPECT_FALSE(s2.scheduled[0].is_new);
  EXPECT_EQ(s2.scheduled[0].block_ids, Ids{});  // position 10 is in block 2
  EXPECT_EQ(s2.scheduled[1].req_id, "r1");
  EXPECT_EQ(s2.scheduled[1].num_computed_tokens, 6);
  EXPECT_EQ(s2.scheduled[1].num_scheduled_tokens, 4);
  EXPECT_EQ(s2.scheduled[1].token_ids, (Ids{106, 107, 108, 109}));
  EXPECT_EQ(s2.scheduled[1].block_ids, (Ids{5}));
  EXPECT_TRUE(s2.scheduled[1].samples);
  EXPECT_EQ(s2.scheduled[2].req_id, "r2");
  EXPECT_EQ(s2.scheduled[2].num_scheduled_tokens, 10);
  EXPECT_EQ(s2.scheduled[2].block_ids, (Ids{6, 7, 8}));
  EXPECT_EQ(s2.total_num_scheduled_tokens, 15);

  h.run(100);
  h.expect_reference_outputs();
  EXPECT_EQ(h.reasons["r0"], FinishReason::Length);
}

TEST(Scheduler, LongPrefillThresholdChunksThePrompt) {
  Harness h(sched_config(64, 4), cache_config(100));
  h.add("r0", range(0, 10), 3);
  std::vector<int64_t> sizes;
  std::vector<bool> samples;
  while (h.sched.has_unfinished_requests()) {
    SchedulerOutput so = h.step();
    sizes.push_back(so.scheduled.at(0).num_scheduled_tokens);
    samples.push_back(so.scheduled.at(0).samples);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2, 1, 1}));
  EXPECT_EQ(samples, (std::vector<bool>{false, false, true, true, true}));
  h.expect_reference_outputs();
}

TEST(Scheduler, MaxNumSeqsAndFifo) {
  Harness h(sched_config(64, 2048, 2), cache_config(100));
  h.add("a", range(0, 3), 2);
  h.add("b", range(10, 13), 2);
  h.add("c", range(20, 23), 2);
  SchedulerOutput s1 = h.step();
  ASSERT_EQ(s1.scheduled.size(), 2u);
  EXPECT_EQ(s1.scheduled[0].req_id, "a");
  EXPECT_EQ(s1.scheduled[1].req_id, "b");
  EXPECT_EQ(h.sched.num_running(), 2u);
  SchedulerOutput s2 = h.step();  // a and b finish (2 tokens each) but c only enters next step
  EXPECT_EQ(s2.scheduled.size(), 2u);
  EXPECT_EQ(h.reasons.size(), 2u);
  SchedulerOutput s3 = h.step();
  ASSERT_EQ(s3.scheduled.size(), 1u);
  EXPECT_EQ(s3.scheduled[0].req_id, "c");
  EXPECT_EQ(s3.finished_req_ids, (std::vector<std::string>{"a", "b"}));
  h.run(10);
  h.expect_reference_outputs();
}

// The sequences of one n > 1 request hold at most 3 of 4 running slots, so a request that
// arrives after it is admitted at once instead of waiting behind its siblings; the skipped
// siblings keep their order and run when the group has room again.
TEST(Scheduler, OneGroupLeavesASlotForOthers) {
  Harness h(sched_config(64, 2048, 4), cache_config(100));
  auto add_sibling = [&](int k) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = 6;
    const std::string id = "big#" + std::to_string(k);
    auto r = std::make_unique<Request>(id, range(0, 3), p, Ids{}, 0);
    r->group_id = "big";
    h.sched.add_request(std::move(r));
    h.prompts[id] = range(0, 3);
    h.max_tokens_[id] = 6;
  };
  for (int k = 0; k < 8; ++k) add_sibling(k);
  SchedulerOutput s1 = h.step();
  ASSERT_EQ(s1.scheduled.size(), 3u) << "a group takes 3 of the 4 slots";
  EXPECT_EQ(s1.scheduled[0].req_id, "big#0");
  EXPECT_EQ(s1.scheduled[2].req_id, "big#2");
  h.add("small", range(10, 13), 2);
  SchedulerOutput s2 = h.step();
  ASSERT_EQ(s2.scheduled.size(), 4u);
  EXPECT_EQ(s2.scheduled[3].req_id, "small") << "the later request takes the free slot, ahead of big#3";
  EXPECT_EQ(h.sched.num_running(), 4u);
  // Once small is done, the fourth slot stays free for others: the group still holds 3.
  h.step();
  SchedulerOutput s4 = h.step();
  EXPECT_EQ(s4.scheduled.size(), 3u);
  h.run(100);
  EXPECT_FALSE(h.sched.has_unfinished_requests());
  EXPECT_EQ(h.reasons.size(), 9u);
  h.expect_reference_outputs();
}

TEST(Scheduler, PreemptsNewestWhenBlocksRunOut) {
  Harness h(sched_config(64, 2048, 16, 16), cache_config(4));
  h.add("r0", range(0, 6), 6);
  h.add("r1", range(10, 16), 6);
  SchedulerOutput s1 = h.step();
  EXPECT_EQ(s1.scheduled[0].block_ids, (Ids{0, 1}));
  EXPECT_EQ(s1.scheduled[1].block_ids, (Ids{2, 3}));
  h.step();  // positions 6
  h.step();  // positions 7
  EXPECT_EQ(h.sched.kv_cache_manager().block_pool().num_free_blocks(), 0);
  // r0 needs a third block for position 8: r1 (newest) is preempted and frees 3 then 2.
  SchedulerOutput s4 = h.step();
  EXPECT_EQ(s4.preempted_req_ids, (std::vector<std::string>{"r1"}));
  ASSERT_EQ(s4.scheduled.size(), 1u);
  EXPECT_EQ(s4.scheduled[0].req_id, "r0");
  EXPECT_EQ(s4.scheduled[0].block_ids, (Ids{3}));
  EXPECT_EQ(h.sched.kv_cache_manager().block_ids("r0"), (Ids{0, 1, 3}));
  EXPECT_EQ(h.sched.kv_cache_manager().block_pool().free_block_ids(), (Ids{2}));
  EXPECT_EQ(h.sched.get_request("r1")->status, RequestStatus::Preempted);
  EXPECT_EQ(h.sched.get_request("r1")->num_computed_tokens, 0);
  EXPECT_EQ(h.sched.num_waiting(), 1u);
  // r1 (9 tokens) hits its first block (block 2, still cached) but needs 2 more: it waits.
  SchedulerOutput s5 = h.step();
  ASSERT_EQ(s5.scheduled.size(), 1u);
  EXPECT_EQ(h.sched.num_waiting(), 1u);
  h.run(100);
  h.expect_reference_outputs();
  EXPECT_EQ(h.sched.num_preemptions(), 1);
  EXPECT_EQ(h.sched.kv_cache_manager().block_pool().num_free_blocks(), 4);
}

TEST(Scheduler, RejectsRequestsThatCanNeverFit) {
  Harness h(sched_config(64, 2048, 16, 16), cache_config(3));
  EXPECT_EQ(add_error(h, "long", range(0, 10), 10),
            "request long: prompt of 10 tokens + max_tokens 10 = 20 tokens exceeds --max-model-len 16");
  EXPECT_EQ(add_error(h, "big", range(0, 10), 4),
            "request big: prompt of 10 tokens + max_tokens 4 needs 4 KV blocks of 4 tokens, but the KV cache "
            "has only 3 blocks (12 tokens)");
  EXPECT_EQ(add_error(h, "empty", {}, 4), "request empty: the prompt is empty");
  EXPECT_EQ(add_error(h, "ok", range(0, 9), 4), "");
  EXPECT_EQ(add_error(h, "ok", range(0, 2), 4), "request ok: a request with this id is already running");
  EXPECT_EQ(h.sched.num_waiting(), 1u);
}

TEST(Scheduler, ConfigValidationNamesTheFlag) {
  SchedulerConfig c;
  c.enable_chunked_prefill = false;
  c.max_num_batched_tokens = 100;
  c.max_model_len = 200;
  try {
    c.validate();
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "without chunked prefill --max-num-batched-tokens (100) must be >= --max-model-len (200): a whole "
                 "prompt must fit one step");
  }
}

// 16 long requests through a pool of a few blocks: every one completes, through preemption, with
// exactly the tokens it produces alone.
void run_many_long_requests(bool prefix_caching, bool shared_prefix) {
  Harness h(sched_config(64, 16, 16, 64), cache_config(20, 4, prefix_caching));
  for (int i = 0; i < 16; ++i) {
    Ids prompt = shared_prefix ? range(0, 12) : Ids{};
    for (int j = 0; j < (shared_prefix ? 8 : 20) + (i * 7) % 17; ++j) prompt.push_back((i * 131 + j * 17) % kVocab);
    h.add("req" + std::to_string(i), prompt, 24);
  }
  h.run(5000);
  EXPECT_FALSE(h.sched.has_unfinished_requests());
  EXPECT_EQ(h.outputs.size(), 16u);
  h.expect_reference_outputs();
  EXPECT_GT(h.sched.num_preemptions(), 0);
  EXPECT_EQ(h.sched.kv_cache_manager().block_pool().num_free_blocks(), 20);
  EXPECT_EQ(h.sched.kv_cache_manager().num_requests(), 0u);
}

TEST(Scheduler, NoDeadlockSixteenLongRequestsFewBlocks) { run_many_long_requests(true, false); }
TEST(Scheduler, NoDeadlockWithoutPrefixCaching) { run_many_long_requests(false, false); }
TEST(Scheduler, NoDeadlockWithSharedPrefix) { run_many_long_requests(true, true); }

TEST(Scheduler, PrefixHitSkipsComputedTokens) {
  Harness h(sched_config(64, 2048), cache_config(100));
  h.add("r0", range(0, 20), 4);
  h.run(100);
  const int64_t computed_cold = h.model.computed_tokens;
  EXPECT_EQ(computed_cold, 20 + 3);
  h.add("r1", range(0, 20), 4);
  SchedulerOutput so = h.step();
  ASSERT_EQ(so.scheduled.size(), 1u);
  EXPECT_EQ(so.scheduled[0].num_computed_tokens, 16);  // 4 blocks of 4; token 19 recomputed
  EXPECT_EQ(so.scheduled[0].num_scheduled_tokens, 4);
  EXPECT_EQ(so.scheduled[0].block_ids, (Ids{0, 1, 2, 3, 6}));
  h.run(100);
  h.expect_reference_outputs();
  const PrefixCacheStats& st = h.sched.kv_cache_manager().prefix_cache_stats();
  EXPECT_EQ(st.requests, 2);
  EXPECT_EQ(st.queried_tokens, 40);
  EXPECT_EQ(st.hit_tokens, 16);
}

TEST(Scheduler, SecondPassHitsEveryFullPromptBlockOfRequestsAdmittedTogether) {
  // Eight prompts share a 10-token prefix and are admitted in one step, so their identical first
  // blocks are all published; the second pass must still follow each request's own chain.
  Harness h(sched_config(512, 2048), cache_config(200));
  std::vector<Ids> prompts;
  int64_t full_blocks = 0;
  for (int i = 0; i < 8; ++i) {
    Ids p = range(0, 10);
    for (int j = 0; j < 5 + i; ++j) p.push_back(100 + i * 20 + j);
    full_blocks += int64_t(p.size() - 1) / 4;
    prompts.push_back(p);
    h.add("a" + std::to_string(i), p, 3);
  }
  h.run(100);
  EXPECT_EQ(h.sched.kv_cache_manager().prefix_cache_stats().hit_tokens, 0);
  for (int i = 0; i < 8; ++i) h.add("b" + std::to_string(i), prompts[size_t(i)], 3);
  h.run(200);
  EXPECT_EQ(h.sched.kv_cache_manager().prefix_cache_stats().hit_tokens, full_blocks * 4);
  h.expect_reference_outputs();
}

TEST(Scheduler, WithoutChunkingAPromptWaitsForAWholeStep) {
  SchedulerConfig c = sched_config(16, 2048, 16, 16);
  c.enable_chunked_prefill = false;
  Harness h(c, cache_config(100));
  h.add("a", range(0, 10), 2);
  h.add("b", range(10, 20), 2);
  SchedulerOutput s1 = h.step();
  ASSERT_EQ(s1.scheduled.size(), 1u);  // b (10) does not fit the 6 left
  SchedulerOutput s2 = h.step();
  ASSERT_EQ(s2.scheduled.size(), 2u);
  EXPECT_EQ(s2.scheduled[1].req_id, "b");
  EXPECT_EQ(s2.scheduled[1].num_scheduled_tokens, 10);
  h.run(10);
  h.expect_reference_outputs();
}

TEST(Scheduler, AbortFreesBlocksImmediately) {
  Harness h(sched_config(64, 2048), cache_config(10, 4, false));
  h.add("a", range(0, 10), 5);
  h.add("w", range(0, 10), 5);
  h.step();
  EXPECT_EQ(h.sched.kv_cache_manager().block_pool().num_free_blocks(), 4);
  const std::vector<std::string> ids = {"a", "w", "unknown"};
  h.sched.finish_requests(ids, RequestStatus::FinishedAborted);
  EXPECT_EQ(h.sched.kv_cache_manager().block_pool().num_free_blocks(), 10);
  EXPECT_FALSE(h.sched.has_unfinished_requests());
  EXPECT_EQ(h.sched.get_request("a"), nullptr);
  SchedulerOutput so = h.sched.schedule();
  EXPECT_TRUE(so.empty());
  EXPECT_EQ(so.finished_req_ids, (std::vector<std::string>{"a", "w"}));
}

// Finish rules, driven with hand-picked tokens.
struct StopCase {
  Harness h{sched_config(64, 2048), cache_config(20)};
  std::vector<EngineCoreOutput> feed(int32_t token) {
    SchedulerOutput so = h.sched.schedule();
    std::vector<SampledToken> sampled(so.scheduled.size());
    for (auto& s : sampled) s.token_id = token;
    return h.sched.update_from_output(so, sampled);
  }
};

TEST(Scheduler, StopsOnEosAfterMinTokensAndOnStopTokens) {
  StopCase c;
  SamplingParams p;
  p.max_tokens = 10;
  p.min_tokens = 2;
  p.stop_token_ids = {7};
  c.h.sched.add_request(std::make_unique<Request>("r", range(0, 3), p, Ids{2}, 0));
  EXPECT_FALSE(c.feed(2).at(0).finish_reason.has_value());  // eos before min_tokens
  auto o = c.feed(2);
  ASSERT_TRUE(o.at(0).finish_reason.has_value());
  EXPECT_EQ(*o[0].finish_reason, FinishReason::Stop);
  EXPECT_EQ(o[0].stop_token_id, 2);

  SamplingParams q;
  q.max_tokens = 10;
  q.ignore_eos = true;
  q.stop_token_ids = {7};
  c.h.sched.add_request(std::make_unique<Request>("s", range(0, 3), q, Ids{2}, 0));
  EXPECT_FALSE(c.feed(2).at(0).finish_reason.has_value());  // eos ignored
  o = c.feed(7);
  EXPECT_EQ(o.at(0).finish_reason, FinishReason::Stop);
  EXPECT_EQ(o[0].stop_token_id, 7);

  SamplingParams m;
  m.max_tokens = 2;
  c.h.sched.add_request(std::make_unique<Request>("m", range(0, 3), m, Ids{}, 0));
  EXPECT_FALSE(c.feed(1).at(0).finish_reason.has_value());
  o = c.feed(1);
  EXPECT_EQ(o.at(0).finish_reason, FinishReason::Length);
  EXPECT_FALSE(o[0].stop_token_id.has_value());
}

}  // namespace
}  // namespace pypto
