// The MTP drafter's context through the prefix cache (engine/mtp_proposer.h, "Prefix caching")
// and through a stretch with speculation off (the cost model's plain steps: no MTP rows then, the
// target's hidden rows kept and the missed rows filled when speculation resumes):
// a two-turn conversation (turn 2's prompt = turn 1's prompt + its answer + more) on the
// tiny-hybrid checkpoints with an MTP head (make-test-model --mtp, model/test_model.h).
//  - lossless: turn 2 prints the same tokens with MTP and the prefix cache as without MTP and as
//    without the prefix cache;
//  - the point of the feature: after turn 2's prefix-cache hit its MTP context starts at 0 (not at
//    the hit), so with a random head, whose drafts depend on the rows its attention reads, turn 2
//    proposes the drafts of a cold run of the same prompt; the oracle head has every draft
//    accepted and the perturbed head accepts what a cold run accepts.
#include <gtest/gtest.h>

#include <map>

#include "engine/mtp_executor.h"
#include "model_harness.h"
#include "mtp_test_model.h"
#include "spec_test_engine.h"
#include "stretch_drafter.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 16;
constexpr test::SpecTestPool kPool{.max_seqs = 4, .blocks = 128, .block_size = kBlockSize, .snapshots = 16};
constexpr int32_t kK = 2;

test::LoadedModel& mtp_model(const std::string& kind) { return test::mtp_test_model(kind, kPool.max_seqs, kK); }

// Forwards to the MTP drafter and records, per request, the drafts it proposed (in order, and by
// the position p of the verified token they follow) and where its MTP context started when it did.
// Engine steps [off_from, off_to) (counted by the scheduler's one set_context_needed() per step)
// run as the cost model runs a stretch with speculation off: the drafter is told its context is
// not needed and nobody drafts.
class RecordingDrafter final : public test::StretchDrafterBase {
 public:
  explicit RecordingDrafter(std::shared_ptr<MtpProposer> mtp) : StretchDrafterBase(std::move(mtp)) {}

  std::map<std::string, Ids> drafts;
  std::map<std::string, std::map<int64_t, Ids>> at_position;  // p -> the drafts after token p
  std::map<std::string, std::map<int64_t, int64_t>> context_at;  // p -> the context's start then
  std::map<std::string, int64_t> context_start;  // the earliest seen while drafting

 private:
  void drafted(const Request& req, const std::vector<int32_t>& out) override {
    Ids& d = drafts[req.request_id];
    d.insert(d.end(), out.begin(), out.end());
    at_position[req.request_id][req.num_computed_tokens] = out;
    context_at[req.request_id][req.num_computed_tokens] = mtp().context_start(req.request_id);
    int64_t& c = context_start.try_emplace(req.request_id, INT64_MAX).first->second;
    c = std::min(c, mtp().context_start(req.request_id));
  }
};

struct Turn {
  Ids tokens;
  SpecDecodeStats stats;  // this turn's alone
  int64_t hit = 0;
};

class Chat {
 public:
  // `drafter` is set while e_ is built: declared before it.
  Chat(const std::string& kind, bool mtp, bool prefix_caching)
      : e_(*mtp_model(kind).model, {.k = mtp ? kK : 0, .budget = 2048, .prefix_caching = prefix_caching},
           [this, &kind](EngineConfig& c, KvCache& cache) -> std::unique_ptr<ModelExecutor> {
             test::LoadedModel& m = mtp_model(kind);
             c.scheduler.speculative.method = SpeculativeMethod::Mtp;
             auto head = std::make_shared<MtpProposer>(m.weights, *m.backend, kPool.blocks + 16, kBlockSize, DType::BF16);
             drafter = std::make_shared<RecordingDrafter>(head);
             c.drafter = drafter;
             return std::make_unique<MtpExecutor>(*m.model, cache, head);
           },
           kPool) {}

  Turn turn(const std::string& id, const Ids& prompt, int32_t max_tokens) {
    const SpecDecodeStats before = e_.engine().scheduler().spec_decode_stats();
    EngineRequest r;
    r.request_id = id;
    r.prompt_token_ids = prompt;
    r.params.temperature = 0.0f;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    e_.engine().add_request(r);
    Turn t;
    for (int step = 0; step < 10000 && e_.engine().has_unfinished_requests(); ++step)
      for (const RequestOutput& o : e_.engine().step()) {
        EXPECT_NE(o.finish_reason, FinishReason::Error) << o.error;
        t.tokens.insert(t.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        if (o.finish_reason) t.hit = o.num_cached_tokens;
      }
    const SpecDecodeStats after = e_.engine().scheduler().spec_decode_stats();
    t.stats.num_draft_tokens = after.num_draft_tokens - before.num_draft_tokens;
    t.stats.num_accepted_tokens = after.num_accepted_tokens - before.num_accepted_tokens;
    return t;
  }

  std::shared_ptr<RecordingDrafter> drafter;

 private:
  test::SpecTestEngine e_;
};

constexpr int32_t kTurn1Tokens = 21, kTurn2Tokens = 16;
const Ids& first_prompt() {
  static const Ids p = test::random_prompt(37, 4711);
  return p;
}
Ids second_prompt(const Ids& answer) {
  Ids p = first_prompt();
  p.insert(p.end(), answer.begin(), answer.end());
  const Ids more = test::random_prompt(9, 4712);
  p.insert(p.end(), more.begin(), more.end());
  return p;
}

// Turn 2 after turn 1 on one engine (the prefix-cache hit), and turn 2 alone (cold).
struct TwoTurns {
  Turn t1, t2, cold;
  std::shared_ptr<RecordingDrafter> chat, alone;
};
TwoTurns two_turns(const std::string& kind) {
  TwoTurns r;
  Chat chat(kind, true, true);
  r.t1 = chat.turn("t1", first_prompt(), kTurn1Tokens);
  r.t2 = chat.turn("t2", second_prompt(r.t1.tokens), kTurn2Tokens);
  r.chat = chat.drafter;
  Chat alone(kind, true, false);
  r.cold = alone.turn("t2", second_prompt(r.t1.tokens), kTurn2Tokens);
  r.alone = alone.drafter;
  return r;
}

TEST(MtpPrefixCache, TwoTurnsPrintTheTokensOfRunsWithoutMtpAndWithoutTheCache) {
  const TwoTurns r = two_turns("random");
  Chat plain("random", false, true);
  const Turn p1 = plain.turn("t1", first_prompt(), kTurn1Tokens);
  const Turn p2 = plain.turn("t2", second_prompt(p1.tokens), kTurn2Tokens);
  EXPECT_EQ(p1.tokens, r.t1.tokens);
  EXPECT_EQ(p2.tokens, r.t2.tokens) << "turn 2 with MTP and the prefix cache";
  EXPECT_EQ(p2.tokens, r.cold.tokens) << "turn 2 with MTP, without the prefix cache";
  EXPECT_GT(p2.hit, 0) << "turn 2 of the plain run did not hit the prefix cache";
}

TEST(MtpPrefixCache, AfterTheHitARandomHeadDraftsAsOnAColdRun) {
  const TwoTurns r = two_turns("random");
  ASSERT_GE(r.t2.hit, 2 * kBlockSize) << "turn 2 should resume from the prefix cache";
  // The context covers the cached prefix: it starts at 0, at or before hit - block_size.
  EXPECT_EQ(r.chat->context_start.at("t2"), 0) << "turn 2's MTP context started at the hit (" << r.t2.hit << ")";
  EXPECT_EQ(r.chat->mtp().context_stats().restored, 1);
  EXPECT_EQ(r.chat->mtp().context_stats().restored_rows, r.t2.hit);
  // The random head's drafts depend on every row it attends to: the same drafts as a cold run.
  ASSERT_FALSE(r.alone->drafts.at("t2").empty());
  EXPECT_EQ(r.chat->drafts.at("t2"), r.alone->drafts.at("t2"));
  EXPECT_EQ(r.t2.stats.num_accepted_tokens, r.cold.stats.num_accepted_tokens);
}

TEST(MtpPrefixCache, AfterTheHitTheOracleAcceptsEveryDraftAndThePerturbedHeadAsOnAColdRun) {
  {
    const TwoTurns r = two_turns("oracle");
    EXPECT_GT(r.t2.hit, 0);
    EXPECT_EQ(r.chat->context_start.at("t2"), 0);
    EXPECT_GT(r.t2.stats.num_draft_tokens, 0);
    EXPECT_EQ(r.t2.stats.num_accepted_tokens, r.t2.stats.num_draft_tokens) << "an oracle draft was rejected";
  }
  const TwoTurns r = two_turns("oracle-perturbed");
  EXPECT_GT(r.t2.hit, 0);
  EXPECT_EQ(r.t2.tokens, r.cold.tokens);
  EXPECT_EQ(r.t2.stats.num_draft_tokens, r.cold.stats.num_draft_tokens);
  EXPECT_EQ(r.t2.stats.num_accepted_tokens, r.cold.stats.num_accepted_tokens);
  EXPECT_EQ(r.chat->drafts.at("t2"), r.alone->drafts.at("t2"));
}

// Speculation off for engine steps [kOffFrom, kOffTo) (the cost model's plain stretch: turn 1
// decodes positions 37.. one token a step with the random head, so the stretch covers ~39..48 and
// the block boundary at 48), then on again.
constexpr int64_t kOffFrom = 2, kOffTo = 12;

// The drafts after position `after`, at every position both runs drafted at, against a run that
// speculated throughout (a draft after position p depends only on the rows [0, p) the head attends
// to and on the drafts before it). Returns the number of positions compared.
int64_t compare_drafts_after(const RecordingDrafter& off, const RecordingDrafter& on, const std::string& id,
                             int64_t after, bool expect_equal) {
  int64_t compared = 0, differing = 0;
  for (const auto& [p, d] : off.at_position.at(id)) {
    if (p <= after) continue;
    auto it = on.at_position.at(id).find(p);
    if (it == on.at_position.at(id).end()) continue;
    const size_t n = std::min(d.size(), it->second.size());
    const bool same = Ids(d.begin(), d.begin() + n) == Ids(it->second.begin(), it->second.begin() + n);
    ++compared;
    differing += !same;
    if (expect_equal) EXPECT_TRUE(same) << "drafts after position " << p << ": " << test::join_ids(d) << " against "
                                        << test::join_ids(it->second) << " speculating throughout";
    if (expect_equal) EXPECT_EQ(off.context_at.at(id).at(p), 0) << "the MTP context restarted before position " << p;
  }
  if (!expect_equal) EXPECT_GT(differing, 0) << "no draft depended on the rows of the stretch";
  return compared;
}

TEST(MtpContext, AfterAStretchWithoutSpeculationARandomHeadDraftsAsWhenAlwaysOn) {
  // One request, 37 prompt tokens, greedy, k = 2. The random head's drafts are all rejected, so
  // engine step s >= 1 verifies the token at position 36 + s, and its SpecThrottle drafts at
  // positions 37-40, pauses 8 steps (41-48), drafts at 49-52, pauses 16, drafts at 69-72. The
  // stretch without speculation lies in the first pause (steps 5.. are positions 41..), so both
  // runs draft at the same positions and differ only in the MTP context: steps [5, 13) end the
  // stretch at the next draft (prepare() fills rows 41..48), steps [5, 11) two steps earlier
  // (the steps with context fill them).
  constexpr int32_t kTokens = 40;
  Chat plain("random", false, false);
  const Turn p = plain.turn("t1", first_prompt(), kTokens);
  Chat on("random", true, false);
  const Turn t_on = on.turn("t1", first_prompt(), kTokens);
  EXPECT_EQ(t_on.tokens, p.tokens);
  constexpr int64_t kStretchStart = 5, kFirstAfter = 49;  // position 48 is step 12's
  for (const int64_t off_to : {13, 11}) {
    SCOPED_TRACE("speculation off in steps [5, " + std::to_string(off_to) + ")");
    Chat off("random", true, false);
    off.drafter->off_from = kStretchStart;
    off.drafter->off_to = off_to;
    const Turn t_off = off.turn("t1", first_prompt(), kTokens);
    EXPECT_EQ(t_off.tokens, p.tokens) << "greedy output with a stretch without speculation";
    EXPECT_EQ(off.drafter->mtp().context_stats().restarts, 0);
    EXPECT_GE(off.drafter->mtp().context_stats().filled_rows, 5) << "the stretch's rows were not filled";
    EXPECT_GE(compare_drafts_after(*off.drafter, *on.drafter, "t1", kFirstAfter - 1, true), 8);
  }
  // The check can fail: with no room for kept rows the context restarts after the stretch (as it
  // did before the rows were kept), the head attends to few rows and drafts otherwise.
  Chat restarted("random", true, false);
  restarted.drafter->off_from = kStretchStart;
  restarted.drafter->off_to = 13;
  restarted.drafter->mtp().set_kept_hidden_limit(0);
  const Turn t_restarted = restarted.turn("t1", first_prompt(), kTokens);
  EXPECT_EQ(t_restarted.tokens, p.tokens);
  EXPECT_GT(restarted.drafter->context_at.at("t1").at(kFirstAfter), 0);
  EXPECT_GT(restarted.drafter->mtp().context_stats().restarts, 0);
  EXPECT_GE(compare_drafts_after(*restarted.drafter, *on.drafter, "t1", kFirstAfter - 1, false), 8);
}

TEST(MtpContext, BlocksWrittenWithoutSpeculationAreSharedOnAHit) {
  // Turn 1 with the stretch (its MTP rows of block 2, positions 32..47, are filled after it), then
  // turn 2 on the same engine: its 48-token hit restores the whole context, as without a stretch.
  Chat chat("random", true, true);
  chat.drafter->off_from = kOffFrom;
  chat.drafter->off_to = kOffTo;
  const Turn t1 = chat.turn("t1", first_prompt(), kTurn1Tokens);
  const Turn t2 = chat.turn("t2", second_prompt(t1.tokens), kTurn2Tokens);
  Chat plain("random", false, true);
  const Turn p1 = plain.turn("t1", first_prompt(), kTurn1Tokens);
  const Turn p2 = plain.turn("t2", second_prompt(p1.tokens), kTurn2Tokens);
  EXPECT_EQ(t1.tokens, p1.tokens);
  EXPECT_EQ(t2.tokens, p2.tokens);
  ASSERT_GE(t2.hit, 3 * kBlockSize) << "turn 2 should resume from the prefix cache past the stretch's block";
  EXPECT_EQ(chat.drafter->mtp().context_stats().restored, 1) << "a block written during the stretch was not shared";
  EXPECT_EQ(chat.drafter->mtp().context_stats().restored_rows, t2.hit);
  EXPECT_EQ(chat.drafter->context_start.at("t2"), 0);
  // And turn 2 drafts what a cold run of its prompt drafts.
  Chat alone("random", true, false);
  const Turn cold = alone.turn("t2", second_prompt(t1.tokens), kTurn2Tokens);
  EXPECT_EQ(chat.drafter->drafts.at("t2"), alone.drafter->drafts.at("t2"));
}

}  // namespace
}  // namespace pypto
