// The draft model's bounded catch-up (engine/draft_token_map.h): after a stretch without drafting
// (the cost model's plain steps, a throttle pause) the draft computes at most
// DraftModelProposer::kMaxCatchUpTokens of the tokens it lacks, keeping what it held and feeding
// only the last ones after it. Over the tiny checkpoints (tests/engine/runner/tiny_draft_models.h).
//  - Its proposals after the skip are exactly those of a fresh draft fed the held prefix and the
//    tail as one sequence (the skipped span is gone from its context, nothing else changes), also
//    after a rollback inside the tail and after a second long stretch (one gap at most).
//  - In an engine whose drafter is off for a 40-step stretch, the step that drafts again computes
//    at most the bound (a full catch-up computed the stretch) and greedy output equals plain
//    decoding; with a draft of other weights (acceptance ~0) no later step computes more, with the
//    target as its own draft the accepted probe brings the skipped span back (one catch-up of it).
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <utility>

#include "engine/draft_model_proposer.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "model_harness.h"
#include "spec_engine_run.h"
#include "tiny_draft_models.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 16;
// DraftModelProposer::kMaxCatchUpTokens, as a literal: without the bound the tests fail, not break.
constexpr int64_t kBound = 16;

std::shared_ptr<const Qwen3Weights> weights(test::LoadedModel& m) {
  return std::shared_ptr<const Qwen3Weights>(std::shared_ptr<void>(), &m.weights);  // borrowed
}

std::unique_ptr<DraftModelProposer> make_drafter(test::LoadedModel& m) {
  return std::make_unique<DraftModelProposer>(weights(m), *test::target_model().backend, 64, kBlockSize, DType::BF16,
                                              4096);
}

// Prefills `r`'s tokens in the draft as the scheduler does beside the target's prompt chunks.
void prefill(DraftModelProposer& d, const Request& r) {
  const DraftProposer::Chunk c{&r, int64_t(r.all_token_ids.size())};
  d.prefill(std::span<const DraftProposer::Chunk>(&c, 1));
}

Ids propose(DraftModelProposer& d, const Request& r, int32_t k) {
  const DraftProposer::Query q{&r, k};
  d.prepare(std::span<const DraftProposer::Query>(&q, 1));
  Ids out;
  d.propose_for(r, k, out);
  return out;
}

void extend(Request& r, const Ids& tokens) {
  for (int32_t t : tokens) {
    r.output_token_ids.push_back(t);
    r.all_token_ids.push_back(t);
  }
}

Ids some_tokens(int n, uint64_t seed) { return test::random_prompt(n, seed); }

TEST(DraftCatchUp, AfterALongStretchTheDraftFeedsOnlyTheTailAndProposesAsIfTheSpanWereNeverThere) {
  SamplingParams sp;
  sp.temperature = 0.0f;
  sp.max_tokens = 200;
  const Ids prompt = test::random_prompt(21, 910);
  Request req("r", prompt, sp, {}, 5);
  auto kept = make_drafter(test::other_model());
  prefill(*kept, req);
  constexpr int32_t k = 3;
  ASSERT_EQ(propose(*kept, req, k).size(), size_t(k));
  EXPECT_EQ(kept->max_step_catch_up_tokens(), 1) << "the prompt was prefilled: only its last token is caught up";
  const int64_t held = int64_t(prompt.size());  // the prompt; its drafts are not verified below

  // 40 verified tokens the draft never saw (a stretch without drafting), none of them a draft.
  extend(req, some_tokens(40, 911));
  const int64_t before = kept->catch_up_tokens();
  const Ids after_gap = propose(*kept, req, k);
  EXPECT_EQ(kept->catch_up_tokens() - before, kBound) << "a full catch-up computes all 40 tokens";
  EXPECT_EQ(kept->skipped_tokens(), int64_t(req.all_token_ids.size()) - held - kBound);

  // What a fresh draft proposes for tokens [0, prefix) followed by the last `tail` tokens, as one
  // sequence it catches up whole in one prepare().
  auto fresh_over = [&](int64_t prefix, int64_t tail) {
    const Ids& t = req.all_token_ids;
    Ids view(t.begin(), t.begin() + prefix);
    view.insert(view.end(), t.end() - tail, t.end());
    Request v("v", view, sp, {}, 5);
    auto fresh = make_drafter(test::other_model());
    fresh->set_max_catch_up_tokens(1 << 20);
    return propose(*fresh, v, k);
  };
  EXPECT_EQ(after_gap, fresh_over(held, kBound));

  // A rejection inside the tail (the target's token is not the first draft): the draft catches up
  // that 1 token and still proposes as the gapped view.
  const int64_t skipped = kept->skipped_tokens();
  extend(req, {(after_gap[0] + 1) % 151643});
  const int64_t before2 = kept->catch_up_tokens();
  const Ids steady = propose(*kept, req, k);
  EXPECT_EQ(kept->catch_up_tokens() - before2, 1);
  EXPECT_EQ(kept->skipped_tokens(), skipped) << "a short catch-up skips nothing";
  EXPECT_EQ(steady, fresh_over(held, kBound + 1));

  // A second long stretch: the first gap's tail is dropped, the draft skips from the prompt again.
  extend(req, some_tokens(30, 912));
  const int64_t before3 = kept->catch_up_tokens();
  const Ids again = propose(*kept, req, k);
  EXPECT_EQ(kept->catch_up_tokens() - before3, kBound);
  EXPECT_EQ(again, fresh_over(held, kBound));

  // Its first draft accepted (then another token): the skipped span comes back, the draft
  // proposes from the whole sequence.
  extend(req, {again[0], (again[1] + 1) % 151643});
  EXPECT_EQ(kept->filled_gaps(), 0);
  const Ids whole = propose(*kept, req, k);
  EXPECT_EQ(kept->filled_gaps(), 1);
  EXPECT_EQ(whole, fresh_over(int64_t(req.all_token_ids.size()), 0));
  kept->finish(req);
  EXPECT_EQ(kept->free_blocks(), 64) << "the request's draft blocks were not all freed";
}

// A draft-model drafter that drafts nothing in engine steps [off_from, off_to) (counted by the
// scheduler's one set_context_needed() per step), as the cost model's plain stretch has it, and
// records which of its drafts come after the stretch.
class StretchDraftModel final : public DraftProposer {
 public:
  explicit StretchDraftModel(std::shared_ptr<DraftModelProposer> d) : d_(std::move(d)) {}
  void propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const override {
    d_->propose(tokens, k, out);
  }
  void prepare(std::span<const Query> queries) override {
    const int64_t before = d_->catch_up_tokens();
    d_->prepare(off() ? std::span<const Query>() : queries);
    if (step_ == off_to) first_after_catch_up = d_->catch_up_tokens() - before;
  }
  void prefill(std::span<const Chunk> chunks) override { d_->prefill(chunks); }
  void propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) override {
    out.clear();
    if (!off()) d_->propose_for(req, k, out);
  }
  void forget(const std::string& id) override { d_->forget(id); }
  void finish(const Request& req) override { d_->finish(req); }
  void set_context_needed(bool needed) override {
    ++step_;
    d_->set_context_needed(needed);
  }
  const DraftDistribution* distribution(const std::string& id) const override { return d_->distribution(id); }
  bool off() const { return step_ >= off_from && step_ < off_to; }

  int64_t off_from = -1, off_to = -1;
  int64_t first_after_catch_up = -1;  // tokens the first drafting step after the stretch caught up

 private:
  std::shared_ptr<DraftModelProposer> d_;
  int64_t step_ = -1;
};

struct StretchRun {
  Ids tokens;
  SpecDecodeStats stats;  // all steps
  int64_t first_after_catch_up = -1, max_step_catch_up = 0, skipped = 0, filled = 0;
};

// One greedy request of `max_tokens` from `prompt`; k > 0 drafts with `draft`, off in engine
// steps [off_from, off_to).
StretchRun run(const Ids& prompt, int32_t max_tokens, int32_t k, test::LoadedModel* draft, int64_t off_from,
               int64_t off_to) {
  Qwen3Model& model = *test::target_model().model;
  KvCache cache(model.kv_cache_spec(64, kBlockSize, DType::BF16));
  EngineConfig c;
  c.scheduler.max_model_len = 512;
  c.cache.block_size = kBlockSize;
  c.cache.num_blocks = 64;
  c.vocab_size = model.vocab_size();
  std::shared_ptr<DraftModelProposer> drafter;
  std::shared_ptr<StretchDraftModel> stretch;
  if (k > 0) {
    c.scheduler.speculative.method = SpeculativeMethod::DraftModel;
    c.scheduler.speculative.num_speculative_tokens = k;
    c.scheduler.speculative.cost_model = false;  // the stretch is played by the drafter
    c.scheduler.speculative.draft_model = "(in memory)";
    drafter = std::make_shared<DraftModelProposer>(weights(*draft), *test::target_model().backend, 72, kBlockSize,
                                                   DType::BF16, 4096);
    stretch = std::make_shared<StretchDraftModel>(drafter);
    stretch->off_from = off_from;
    stretch->off_to = off_to;
    c.drafter = stretch;
  }
  Engine engine(c, std::make_unique<ModelRunner>(model, cache));
  StretchRun out;
  out.tokens = test::run_spec_requests(engine, {prompt}, max_tokens, 0.0f, 0, "r").tokens["r0"];
  out.stats = engine.scheduler().spec_decode_stats();
  if (stretch) {
    out.first_after_catch_up = stretch->first_after_catch_up;
    out.max_step_catch_up = drafter->max_step_catch_up_tokens();
    out.skipped = drafter->skipped_tokens();
    out.filled = drafter->filled_gaps();
  }
  return out;
}

constexpr int32_t kTokens = 90;
const Ids& stretch_prompt() {
  static const Ids p = test::random_prompt(24, 920);
  return p;
}

// Steps 3 .. 42 draft nothing (the request advances by 1 token a step there: 40 tokens the draft
// has not seen); every step before and after drafts k = 2.
TEST(DraftCatchUp, AtAcceptanceZeroNoCatchUpAfterAFortyStepStretchExceedsTheBound) {
  const StretchRun plain = run(stretch_prompt(), kTokens, 0, nullptr, -1, -1);
  const StretchRun spec = run(stretch_prompt(), kTokens, 2, &test::other_model(), 3, 43);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_EQ(spec.first_after_catch_up, kBound) << "the first drafting step after the stretch caught up "
                                               << spec.first_after_catch_up << " tokens";
  EXPECT_LE(spec.max_step_catch_up, kBound);
  EXPECT_GT(spec.skipped, 0);
  EXPECT_EQ(spec.filled, 0) << "no draft after the skip was accepted";
  EXPECT_GT(spec.stats.num_draft_tokens, 8);
}

// The target as its own draft: the probe after the stretch (drafts from the prompt and the last
// kBound tokens) is accepted, so the next step computes the skipped span and the request drafts on
// with its whole context.
TEST(DraftCatchUp, AnAcceptedDraftAfterTheSkipBringsTheSkippedSpanBack) {
  const StretchRun plain = run(stretch_prompt(), kTokens, 0, nullptr, -1, -1);
  const StretchRun spec = run(stretch_prompt(), kTokens, 2, &test::target_model(), 3, 43);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_EQ(spec.first_after_catch_up, kBound);
  EXPECT_EQ(spec.filled, 1);
  EXPECT_GT(spec.max_step_catch_up, kBound) << "the skipped span is computed once its drafts pay";
  EXPECT_GT(spec.stats.num_draft_tokens, 20);
  EXPECT_GE(double(spec.stats.num_accepted_tokens), 0.9 * double(spec.stats.num_draft_tokens))
      << spec.stats.num_accepted_tokens << " of " << spec.stats.num_draft_tokens << " drafts accepted";
}

}  // namespace
}  // namespace pypto
