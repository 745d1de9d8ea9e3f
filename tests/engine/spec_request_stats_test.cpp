// Per-request speculative-decoding counts (engine/spec_request_stats.h): the counts each output
// carries, added up per sequence, equal the engine's counters (what /metrics exports) over several
// requests batched together, n > 1 included; a model whose output the n-gram drafts always predict
// gives acceptance rate 1 and every verify step in the histogram's last bucket (k); the JSON form
// has vLLM's field names, zeros for a sequence that never speculated, and the per-step arrays
// only at the detailed level.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "core/error.h"
#include "engine/engine.h"
#include "engine/spec_request_stats.h"
#include "fake_model.h"

namespace pypto {
namespace {

using testing::FakeModel;
using Ids = std::vector<int32_t>;

constexpr int32_t kVocab = 50;
constexpr int32_t kBlockSize = 4;
constexpr int32_t kK = 3;  // num_speculative_tokens

constexpr FakeModel::Predictor copy_back = FakeModel::copy_back;  // period 3: drafts always right
constexpr FakeModel::Predictor mostly_copy = FakeModel::mostly_copy;  // drafts partly rejected

class Exec : public ModelExecutor {
 public:
  Exec(int32_t num_blocks, FakeModel::Predictor p) : model_(num_blocks, kBlockSize, kVocab, p) {}
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    out.vocab_size = kVocab;
    out.logits = model_.execute_logits(so);
    out.step_seconds = -1;
  }

 private:
  FakeModel model_;
};

std::unique_ptr<Engine> make_engine(FakeModel::Predictor p) {
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = 64;
  c.scheduler.long_prefill_token_threshold = 8;
  c.scheduler.max_model_len = 96;
  c.cache.block_size = kBlockSize;
  c.cache.num_blocks = 128;
  c.vocab_size = kVocab;
  c.eos_token_ids = {kVocab - 1};
  c.scheduler.speculative.method = SpeculativeMethod::Ngram;
  c.scheduler.speculative.num_speculative_tokens = kK;
  c.scheduler.speculative.prompt_lookup_min = 2;
  c.scheduler.speculative.prompt_lookup_max = 4;
  c.scheduler.speculative.cost_model = false;  // draft every step a draft is found
  return std::make_unique<Engine>(c, std::make_unique<Exec>(128, p));
}

EngineRequest request(const std::string& id, Ids prompt, int32_t max_tokens, int32_t n = 1) {
  EngineRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  r.params.n = n;
  if (n > 1) {  // sampled, so that the sequences differ; seeded, so the test is reproducible
    r.params.temperature = 0.8f;
    r.params.seed = 7;
  }
  return r;
}

// Each sequence's counts, added up from its outputs as the front ends do.
std::map<std::string, SpecRequestStats> run(Engine& e, SpecStatsLevel level) {
  std::map<std::string, SpecRequestStats> stats;
  for (int i = 0; i < 2000 && e.has_unfinished_requests(); ++i)
    for (const RequestOutput& o : e.step()) {
      auto it = stats.try_emplace(o.request_id + "/" + std::to_string(o.index), kK, level).first;
      it->second.observe(o.num_draft_tokens, o.num_accepted_draft_tokens);
    }
  EXPECT_FALSE(e.has_unfinished_requests());
  return stats;
}

Ids periodic_prompt(int seed) {  // two periods of 3 tokens then one more: the n-gram matches at once
  const Ids p = {seed % 40, seed % 40 + 1, seed % 40 + 2};
  return {p[0], p[1], p[2], p[0], p[1], p[2], p[0]};
}

TEST(SpecRequestStats, SumsOverConcurrentSequencesEqualTheEngineCounters) {
  std::unique_ptr<Engine> e = make_engine(mostly_copy);
  for (int i = 0; i < 5; ++i) e->add_request(request("r" + std::to_string(i), periodic_prompt(3 * i + 1), 20 + 3 * i));
  e->add_request(request("n", periodic_prompt(30), 24, /*n=*/3));
  const auto stats = run(*e, SpecStatsLevel::Detailed);
  ASSERT_EQ(stats.size(), 8u);
  const SpecDecodeStats& engine = e->scheduler().spec_decode_stats();
  int64_t steps = 0, drafted = 0, accepted = 0;
  std::vector<int64_t> per_pos(kK, 0);
  for (const auto& [id, s] : stats) {
    steps += s.num_spec_steps;
    drafted += s.num_draft_tokens;
    accepted += s.num_accepted_draft_tokens;
    ASSERT_EQ(s.acceptance_histogram.size(), size_t(kK) + 1) << id;
    int64_t hist_steps = 0, hist_accepted = 0;
    for (size_t a = 0; a < s.acceptance_histogram.size(); ++a) {
      hist_steps += s.acceptance_histogram[a];
      hist_accepted += int64_t(a) * s.acceptance_histogram[a];
      for (size_t p = 0; p < a; ++p) per_pos[p] += s.acceptance_histogram[a];
    }
    EXPECT_EQ(hist_steps, s.num_spec_steps) << id;
    EXPECT_EQ(hist_accepted, s.num_accepted_draft_tokens) << id;
    ASSERT_EQ(s.draft_tokens_per_step.size(), size_t(s.num_spec_steps)) << id;
    ASSERT_EQ(s.accepted_draft_tokens_per_step.size(), size_t(s.num_spec_steps)) << id;
    int64_t d = 0, a = 0;
    for (size_t j = 0; j < s.draft_tokens_per_step.size(); ++j) {
      EXPECT_GE(s.draft_tokens_per_step[j], 1) << id;
      EXPECT_LE(s.draft_tokens_per_step[j], kK) << id;
      EXPECT_LE(s.accepted_draft_tokens_per_step[j], s.draft_tokens_per_step[j]) << id;
      d += s.draft_tokens_per_step[j];
      a += s.accepted_draft_tokens_per_step[j];
    }
    EXPECT_EQ(d, s.num_draft_tokens) << id;
    EXPECT_EQ(a, s.num_accepted_draft_tokens) << id;
  }
  EXPECT_EQ(steps, engine.num_drafts);
  EXPECT_EQ(drafted, engine.num_draft_tokens);
  EXPECT_EQ(accepted, engine.num_accepted_tokens);
  for (int p = 0; p < kK; ++p) EXPECT_EQ(per_pos[size_t(p)], engine.accepted_per_pos.at(size_t(p))) << "position " << p;
  // The test means something: drafts were verified, some accepted and some rejected.
  EXPECT_GT(engine.num_accepted_tokens, 0);
  EXPECT_LT(engine.num_accepted_tokens, engine.num_draft_tokens);
}

// max_tokens = 1 + 5 (k + 1): the prefill's token, then five verify steps of k drafts each, all
// accepted (the scheduler drafts at most max_tokens - output - 1, exactly k in the last step).
TEST(SpecRequestStats, AlwaysRightDraftsGiveRateOneAndEveryStepAtK) {
  std::unique_ptr<Engine> e = make_engine(copy_back);
  for (int i = 0; i < 3; ++i) e->add_request(request("r" + std::to_string(i), periodic_prompt(5 * i + 2), 1 + 5 * (kK + 1)));
  const auto stats = run(*e, SpecStatsLevel::Summary);
  ASSERT_EQ(stats.size(), 3u);
  for (const auto& [id, s] : stats) {
    EXPECT_EQ(s.num_spec_steps, 5) << id;
    EXPECT_EQ(s.num_draft_tokens, 5 * kK) << id;
    EXPECT_EQ(s.draft_acceptance_rate(), 1.0) << id;
    EXPECT_EQ(s.mean_acceptance_length(), 1.0 + kK) << id;
    EXPECT_EQ(s.acceptance_histogram, (std::vector<int64_t>{0, 0, 0, 5})) << id;
    EXPECT_TRUE(s.draft_tokens_per_step.empty()) << id;  // summary: no per-step arrays
  }
}

TEST(SpecRequestStats, JsonFieldsAndZerosWithoutSpeculation) {
  SpecRequestStats none(4, SpecStatsLevel::Summary);
  const nlohmann::ordered_json z = spec_request_stats_json(none);
  EXPECT_EQ(z.dump(),
            R"({"mean_acceptance_length":0.0,"draft_acceptance_rate":0.0,"acceptance_histogram":[0,0,0,0,0],)"
            R"("num_spec_steps":0,"num_accepted_draft_tokens":0,"num_draft_tokens":0,"num_spec_tokens":4})");

  SpecRequestStats s(3, SpecStatsLevel::Detailed);
  s.observe(3, 2);
  s.observe(0, 0);  // a step without drafts: not a verify step
  s.observe(3, 3);
  s.observe(2, 0);
  const nlohmann::ordered_json j = spec_request_stats_json(s);
  EXPECT_EQ(j["num_spec_steps"], 3);
  EXPECT_EQ(j["num_draft_tokens"], 8);
  EXPECT_EQ(j["num_accepted_draft_tokens"], 5);
  EXPECT_EQ(j["num_spec_tokens"], 3);
  EXPECT_DOUBLE_EQ(j["mean_acceptance_length"].get<double>(), 1.0 + 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(j["draft_acceptance_rate"].get<double>(), 5.0 / 8.0);
  EXPECT_EQ(j["acceptance_histogram"], nlohmann::ordered_json({1, 0, 1, 1}));
  EXPECT_EQ(j["draft_tokens_per_step"], nlohmann::ordered_json({3, 3, 2}));
  EXPECT_EQ(j["accepted_draft_tokens_per_step"], nlohmann::ordered_json({2, 3, 0}));
}

TEST(SpecRequestStats, LevelNamesAndRefusal) {
  EXPECT_EQ(parse_spec_stats_level("none"), SpecStatsLevel::None);
  EXPECT_EQ(parse_spec_stats_level("summary"), SpecStatsLevel::Summary);
  EXPECT_EQ(parse_spec_stats_level("detailed"), SpecStatsLevel::Detailed);
  try {
    parse_spec_stats_level("full");
    FAIL() << "accepted 'full'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'full' is not a level; allowed: none, summary, detailed"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace pypto
