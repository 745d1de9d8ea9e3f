// Progress of a long prompt's chunked prefill (issue 31, engine/prefill_progress.h): the gauges
// and counter /metrics shows while its chunks run beside a decoding request, the log lines each
// multiple of kPrefillLogStride, and a second request sharing its prefix (a prefix-cache hit:
// in the gauge, not in the computed-tokens counter).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/prefill_progress.h"
#include "engine/scheduler.h"
#include "fake_model.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kVocab = 1000;
constexpr int32_t kBlock = 16;

Ids long_prompt(int32_t n, int32_t salt) {
  Ids ids;
  for (int32_t i = 0; i < n; ++i) ids.push_back((i * 7 + salt) % kVocab);
  return ids;
}

struct PrefillRun {
  Scheduler sched;
  testing::FakeModel model;
  PrefillRun(int64_t budget, int64_t max_len, int32_t blocks)
      : sched(
            [&] {
              SchedulerConfig c;
              c.max_num_batched_tokens = budget;
              c.long_prefill_token_threshold = budget;
              c.max_num_seqs = 8;
              c.max_model_len = max_len;
              return c;
            }(),
            [&] {
              CacheConfig c;
              c.num_blocks = blocks;
              c.block_size = kBlock;
              c.enable_prefix_caching = true;
              return c;
            }()),
        model(blocks, kBlock, kVocab) {}

  void add(const std::string& id, Ids prompt, int32_t max_tokens) {
    SamplingParams p;
    p.temperature = 0.0f;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    sched.add_request(std::make_unique<Request>(id, std::move(prompt), p, Ids{}, 0));
  }
  // One step; the ids that got a token.
  std::vector<std::string> step() {
    SchedulerOutput so = sched.schedule();
    const Ids tokens = model.execute(so);
    std::vector<SampledToken> sampled(so.scheduled.size());
    size_t k = 0;
    for (size_t i = 0; i < so.scheduled.size(); ++i)
      if (so.scheduled[i].samples && k < tokens.size()) sampled[i].token_id = tokens[k++];
    std::vector<std::string> got;
    for (const EngineCoreOutput& o : sched.update_from_output(so, sampled))
      if (!o.new_token_ids.empty()) got.push_back(o.req_id);
    return got;
  }
};

TEST(PrefillProgress, LongPromptChunksShowInGaugesCounterAndLog) {
  constexpr int32_t kLong = 10000, kShort = 10, kBudget = 2048;
  PrefillRun r(kBudget, kLong + 64, 1024);
  r.add("short", long_prompt(kShort, 3), 40);
  r.step();  // the short prompt's prefill: 10 tokens, below the log threshold
  PrefillProgress p = r.sched.prefill_progress();
  EXPECT_EQ(p.requests, 0);
  EXPECT_EQ(p.computed_total, kShort);

  ::testing::internal::CaptureStderr();
  r.add("long", long_prompt(kLong, 1), 4);
  int64_t computed = 0;
  int short_tokens = 0, steps = 0;
  while (computed < kLong) {
    const std::vector<std::string> got = r.step();
    ++steps;
    // The short request decodes one token in every step the long prompt's chunks run.
    EXPECT_NE(std::find(got.begin(), got.end(), "short"), got.end()) << "step " << steps;
    ++short_tokens;
    computed = r.sched.get_request("long")->num_computed_tokens;
    p = r.sched.prefill_progress();
    // Each step: the short request's decode token, the rest of the budget to the long prompt.
    EXPECT_EQ(computed, std::min<int64_t>(kLong, int64_t(steps) * (kBudget - 1)));
    EXPECT_EQ(p.computed_total, kShort + computed);
    if (computed < kLong) {
      EXPECT_EQ(p.requests, 1);
      EXPECT_EQ(p.computed_tokens, computed);
      EXPECT_EQ(p.prompt_tokens, kLong);
    } else {
      EXPECT_EQ(p.requests, 0);
      EXPECT_EQ(p.prompt_tokens, 0);
    }
  }
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(steps, 5);  // 2047 tokens a step
  // A line as the prompt passes 4096 and 8192 tokens, and one when it is done: the first after
  // step 3 (6141 tokens), the second after step 5 (the end), which also passes 8192.
  EXPECT_NE(log.find("prefill long: 6141 / 10000 prompt tokens (61.4 %)"), std::string::npos) << log;
  EXPECT_NE(log.find("prefill long: 10000 / 10000 prompt tokens (100.0 %)"), std::string::npos) << log;
  EXPECT_NE(log.find(", done"), std::string::npos) << log;
  EXPECT_EQ(log.find("prefill short"), std::string::npos) << log;
  EXPECT_EQ(log.find("prefill long: 2047"), std::string::npos) << log;  // no multiple of 4096 passed
  size_t lines = 0;
  for (size_t at = 0; (at = log.find("prefill long:", at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 2u) << log;

  // A second request with the same 10,000-token document and its own question: the document's
  // full blocks come from the prefix cache, in the gauge at once, not in the counter.
  Ids doc = long_prompt(kLong, 1);
  doc.insert(doc.end(), {5, 6, 7, 8});
  const int64_t total_before = r.sched.prefill_progress().computed_total;
  r.add("second", doc, 2);
  r.step();
  const Request* second = r.sched.get_request("second");
  ASSERT_NE(second, nullptr);
  const int64_t hit = (kLong / kBlock) * kBlock;
  EXPECT_EQ(second->num_cached_tokens.value_or(-1), hit);
  EXPECT_EQ(r.sched.prefill_progress().computed_total - total_before, int64_t(doc.size()) - hit);
}

}  // namespace
}  // namespace pypto
