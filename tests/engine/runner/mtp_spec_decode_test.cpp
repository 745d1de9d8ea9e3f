// MTP speculative decoding (engine/mtp_proposer.h) through the engine over tiny-hybrid checkpoints
// with an MTP head (make-test-model --mtp, model/test_model.h):
//  - "oracle": the target's next token depends only on the current one and the MTP head predicts
//    exactly that, so every greedy draft must be accepted, for k = 1, 2, 3;
//  - "oracle-perturbed": the same with another mtp.norm, so only some drafts agree; the accepted
//    count must equal the one predicted from the head's own choice per token (g) against the
//    target's (f, the plain run), replayed through the scheduler's rules (draft limit, throttle);
//  - "random": random MTP weights (drafts rarely right).
// In every case greedy output equals the run without speculation token for token — alone,
// batched with chunked prefill, and prefix-cached — and seeded sampling finishes (rejection
// sampling with the head's distributions).
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/mtp_executor.h"
#include "model_harness.h"
#include "mtp_test_model.h"
#include "spec_test_engine.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
using Setup = test::SpecTestSetup;
using Outcome = test::SpecTestOutcome;
constexpr test::SpecTestPool kPool;  // the engine's KV pool
constexpr int32_t kMaxK = 3;

test::LoadedModel& mtp_model(const std::string& kind) { return test::mtp_test_model(kind, kPool.max_seqs, kMaxK); }

// The engine over mtp_model(kind), drafting with its MTP head when s.k > 0.
test::SpecTestEngine mtp_engine(const std::string& kind, const Setup& s) {
  test::LoadedModel& m = mtp_model(kind);
  return test::SpecTestEngine(*m.model, s, [&](EngineConfig& c, KvCache& cache) -> std::unique_ptr<ModelExecutor> {
    c.scheduler.speculative.method = SpeculativeMethod::Mtp;
    auto mtp = std::make_shared<MtpProposer>(m.weights, *m.backend, kPool.blocks + 64, kPool.block_size, DType::BF16);
    c.drafter = mtp;
    return std::make_unique<MtpExecutor>(*m.model, cache, mtp);
  });
}

Outcome run_once(const std::string& kind, const Setup& s, const std::vector<Ids>& prompts, int32_t max_tokens) {
  return mtp_engine(kind, s).run(prompts, max_tokens);
}

TEST(MtpSpecDecode, OracleHeadHasEveryGreedyDraftAcceptedAndChangesNothing) {
  const std::vector<Ids> ps = test::spec_test_prompts(2);
  const Outcome plain = run_once("oracle", {}, ps, 16);
  for (int32_t k = 1; k <= kMaxK; ++k) {
    SCOPED_TRACE("k = " + std::to_string(k));
    const Outcome spec = run_once("oracle", {.k = k}, ps, 16);
    EXPECT_EQ(plain.tokens, spec.tokens);
    EXPECT_GT(spec.stats.num_draft_tokens, 0);
    EXPECT_EQ(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens) << "an oracle draft was rejected";
  }
}

// The head's greedy draft after token y (the oracle head ignores the hidden state and its
// attention adds nothing, so one row with a zero hidden state shows its choice).
int32_t head_choice(test::LoadedModel& m, int32_t y) {
  MtpHead head(m.weights, *m.backend);
  KvCache cache(head.kv_cache_spec(1, kPool.block_size, DType::F32));
  ForwardBatch b;
  b.max_blocks_per_seq = 1;
  const int32_t block = 0;
  b.add_sequence(&y, 1, 0, &block, 1, kPool.block_size, ForwardBatch::Logits::Last);
  std::vector<float> hidden(size_t(m.model->hidden_size()), 0.0f), logits(size_t(m.model->vocab_size()));
  head.forward(b, hidden.data(), cache, logits.data());
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

TEST(MtpSpecDecode, PerturbedHeadGivesThePredictedPartialAcceptanceLosslessly) {
  test::LoadedModel& m = mtp_model("oracle-perturbed");
  const Ids prompt = test::spec_test_prompts(1)[0];
  constexpr int32_t kTokens = 30;
  const Outcome plain = run_once("oracle-perturbed", {}, {prompt}, kTokens);
  const Outcome spec = run_once("oracle-perturbed", {.k = 1}, {prompt}, kTokens);
  EXPECT_EQ(plain.tokens, spec.tokens);
  // Replay: after the first token each step drafts g(last) if the throttle and the max_tokens
  // limit allow; the target accepts it iff it is the plain run's next token (f(last)).
  const Ids& out = plain.tokens.at("p0");
  const auto [drafted, accepted] =
      test::replay_k1_acceptance(out, kTokens, [&](size_t o) { return head_choice(m, out[o - 1]) == out[o]; });
  EXPECT_EQ(spec.stats.num_draft_tokens, drafted);
  EXPECT_EQ(spec.stats.num_accepted_tokens, accepted);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted) << "the perturbed head agreed everywhere: not a partial acceptance";
}

TEST(MtpSpecDecode, BatchedChunkedAndPrefixCachedOutputsAreUnchanged) {
  const std::vector<Ids> ps = test::spec_test_prompts(3, 20);
  {  // random head weights: drafts mostly rejected, 7-token chunks, a 40-token budget
    const Outcome plain = run_once("random", {}, ps, 10);
    EXPECT_EQ(plain.tokens, run_once("random", {.k = 2, .threshold = 7, .budget = 40}, ps, 10).tokens);
  }
  const Outcome plain = run_once("oracle-perturbed", {}, ps, 12);
  EXPECT_EQ(plain.tokens, run_once("oracle-perturbed", {.k = 2, .threshold = 7, .budget = 40}, ps, 12).tokens);
  test::SpecTestEngine cached = mtp_engine("oracle-perturbed", {.k = 3, .prefix_caching = true});
  EXPECT_EQ(plain.tokens, cached.run(ps, 12, "p").tokens);
  const Outcome again = cached.run(ps, 12, "p");  // resumes from the prefix cache, the head's context restored
  EXPECT_EQ(plain.tokens, again.tokens);
  EXPECT_GT(again.hits, 0) << "no prefix-cache hit";
  EXPECT_GT(again.stats.num_accepted_tokens, 0);
}

// With the cost model choosing k each step (0 where verifying does not pay, probes, the MTP head
// skipping its rows while off and restarting its context) the output is still the plain run's.
TEST(MtpSpecDecode, TheCostModelChangesOnlySpeed) {
  const std::vector<Ids> ps = test::spec_test_prompts(3, 20);
  for (const char* kind : {"random", "oracle", "oracle-perturbed"}) {
    SCOPED_TRACE(kind);
    const Outcome plain = run_once(kind, {}, ps, 40);
    EXPECT_EQ(plain.tokens, run_once(kind, {.k = 3, .cost_model = true}, ps, 40).tokens);
    EXPECT_EQ(plain.tokens, run_once(kind, {.k = 2, .threshold = 7, .budget = 40, .cost_model = true}, ps, 40).tokens);
  }
}

TEST(MtpSpecDecode, SeededSamplingRunsThroughRejectionSampling) {
  const std::vector<Ids> ps = test::spec_test_prompts(1);
  const Outcome spec = run_once("oracle-perturbed", {.k = 2, .temperature = 0.8f}, ps, 12);
  for (const auto& [id, t] : spec.tokens) EXPECT_EQ(t.size(), 12u) << id;
  EXPECT_GT(spec.stats.num_draft_tokens, 0);
}

}  // namespace
}  // namespace pypto
