// The MTP drafter's context through the prefix cache (engine/mtp_proposer.h, "Prefix caching"):
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

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/mtp_executor.h"
#include "model_harness.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 16;
constexpr int32_t kMaxSeqs = 4;
constexpr int32_t kK = 2;
constexpr int32_t kBlocks = 128;

test::LoadedModel& mtp_model(const std::string& kind) {
  static std::map<std::string, std::unique_ptr<test::LoadedModel>> models;
  std::unique_ptr<test::LoadedModel>& m = models[kind];
  if (!m) {
    TestModelOptions o;
    o.preset = "tiny-hybrid";
    o.mtp = kind;
    StagingOptions so;
    so.mtp = true;
    m = test::load_model(test::ensure_test_model("tiny-hybrid-mtp-" + kind, o), /*scalar=*/false, 2, so);
    m->weights.state_slots = kMaxSeqs;
    m->weights.state_snapshots = 32;
    m->weights.state_rollback = kK;
    m->model = std::make_unique<Qwen3Model>(m->weights, *m->backend);
  }
  return *m;
}

// Forwards to the MTP drafter and records, per request, the drafts it proposed and where its MTP
// context started when it did.
class RecordingDrafter final : public DraftProposer {
 public:
  explicit RecordingDrafter(std::shared_ptr<MtpProposer> mtp) : mtp_(std::move(mtp)) {}
  void propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const override {
    mtp_->propose(tokens, k, out);
  }
  void prepare(std::span<const Query> queries) override { mtp_->prepare(queries); }
  void propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) override {
    mtp_->propose_for(req, k, out);
    if (out.empty()) return;
    Ids& d = drafts[req.request_id];
    d.insert(d.end(), out.begin(), out.end());
    int64_t& c = context_start.try_emplace(req.request_id, INT64_MAX).first->second;
    c = std::min(c, mtp_->context_start(req.request_id));
  }
  void forget(const std::string& id) override { mtp_->forget(id); }
  void finish(const Request& req) override { mtp_->finish(req); }
  void set_context_needed(bool needed) override { mtp_->set_context_needed(needed); }
  void set_target_kv_blocks(int64_t n) override { mtp_->set_target_kv_blocks(n); }
  const DraftDistribution* distribution(const std::string& id) const override { return mtp_->distribution(id); }

  std::map<std::string, Ids> drafts;
  std::map<std::string, int64_t> context_start;  // the earliest seen while drafting
  const MtpProposer& mtp() const { return *mtp_; }

 private:
  std::shared_ptr<MtpProposer> mtp_;
};

struct Turn {
  Ids tokens;
  SpecDecodeStats stats;  // this turn's alone
  int64_t hit = 0;
};

class Chat {
 public:
  Chat(const std::string& kind, bool mtp, bool prefix_caching) {
    test::LoadedModel& m = mtp_model(kind);
    cache_ = std::make_unique<KvCache>(m.model->kv_cache_spec(kBlocks, kBlockSize, DType::BF16));
    EngineConfig c;
    c.scheduler.max_num_seqs = kMaxSeqs;
    c.scheduler.max_num_batched_tokens = 2048;
    c.scheduler.max_model_len = 512;
    c.cache.block_size = kBlockSize;
    c.cache.num_blocks = kBlocks;
    c.cache.enable_prefix_caching = prefix_caching;
    c.cache.recurrent_state = true;
    c.cache.state_snapshots = prefix_caching ? 16 : 0;
    c.cache.state_snapshot_interval = 32;
    c.vocab_size = m.model->vocab_size();
    std::unique_ptr<ModelExecutor> exec;
    if (mtp) {
      c.scheduler.speculative.method = SpeculativeMethod::Mtp;
      c.scheduler.speculative.num_speculative_tokens = kK;
      c.scheduler.speculative.cost_model = false;
      auto head = std::make_shared<MtpProposer>(m.weights, *m.backend, kBlocks + 16, kBlockSize, DType::BF16);
      drafter = std::make_shared<RecordingDrafter>(head);
      c.drafter = drafter;
      exec = std::make_unique<MtpExecutor>(*m.model, *cache_, head);
    } else {
      exec = std::make_unique<ModelRunner>(*m.model, *cache_);
    }
    engine_ = std::make_unique<Engine>(c, std::move(exec));
  }

  Turn turn(const std::string& id, const Ids& prompt, int32_t max_tokens) {
    const SpecDecodeStats before = engine_->scheduler().spec_decode_stats();
    EngineRequest r;
    r.request_id = id;
    r.prompt_token_ids = prompt;
    r.params.temperature = 0.0f;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    engine_->add_request(r);
    Turn t;
    for (int step = 0; step < 10000 && engine_->has_unfinished_requests(); ++step)
      for (const RequestOutput& o : engine_->step()) {
        EXPECT_NE(o.finish_reason, FinishReason::Error) << o.error;
        t.tokens.insert(t.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
        if (o.finish_reason) t.hit = o.num_cached_tokens;
      }
    const SpecDecodeStats after = engine_->scheduler().spec_decode_stats();
    t.stats.num_draft_tokens = after.num_draft_tokens - before.num_draft_tokens;
    t.stats.num_accepted_tokens = after.num_accepted_tokens - before.num_accepted_tokens;
    return t;
  }

  std::shared_ptr<RecordingDrafter> drafter;

 private:
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Engine> engine_;
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

}  // namespace
}  // namespace pypto
