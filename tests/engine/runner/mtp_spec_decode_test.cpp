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

#include <map>

#include "engine/engine.h"
#include "engine/model_runner.h"
#include "engine/mtp_executor.h"
#include "engine/spec_throttle.h"
#include "model_harness.h"
#include "spec_engine_run.h"
#include "mtp_test_model.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 16;
constexpr int32_t kMaxSeqs = 8;
constexpr int32_t kMaxK = 3;
constexpr int32_t kBlocks = 256;

test::LoadedModel& mtp_model(const std::string& kind) { return test::mtp_test_model(kind, kMaxSeqs, kMaxK); }

struct Setup {
  int32_t k = 0;  // 0: no speculation
  int64_t threshold = 2048;
  int64_t budget = 4096;
  bool prefix_caching = false;
  float temperature = 0.0f;
  bool cost_model = false;  // the mechanics tests draft every step; the cost model's own test sets it
};

struct Outcome {
  std::map<std::string, Ids> tokens;
  SpecDecodeStats stats;
  int64_t hits = 0;
};

class MtpEngine {
 public:
  MtpEngine(const std::string& kind, const Setup& s) : s_(s) {
    test::LoadedModel& m = mtp_model(kind);
    cache_ = std::make_unique<KvCache>(m.model->kv_cache_spec(kBlocks, kBlockSize, DType::BF16));
    EngineConfig c;
    c.scheduler.max_num_seqs = kMaxSeqs;
    c.scheduler.max_num_batched_tokens = s.budget;
    c.scheduler.long_prefill_token_threshold = s.threshold;
    c.scheduler.max_model_len = 512;
    c.cache.block_size = kBlockSize;
    c.cache.num_blocks = kBlocks;
    c.cache.enable_prefix_caching = s.prefix_caching;
    c.cache.recurrent_state = true;
    c.cache.state_snapshots = s.prefix_caching ? 32 : 0;
    c.cache.state_snapshot_interval = 32;
    c.vocab_size = m.model->vocab_size();
    std::unique_ptr<ModelExecutor> exec;
    if (s.k > 0) {
      c.scheduler.speculative.method = SpeculativeMethod::Mtp;
      c.scheduler.speculative.num_speculative_tokens = s.k;
      c.scheduler.speculative.cost_model = s.cost_model;
      auto mtp = std::make_shared<MtpProposer>(m.weights, *m.backend, kBlocks + 64, kBlockSize, DType::BF16);
      c.drafter = mtp;
      exec = std::make_unique<MtpExecutor>(*m.model, *cache_, mtp);
    } else {
      exec = std::make_unique<ModelRunner>(*m.model, *cache_);
    }
    engine_ = std::make_unique<Engine>(c, std::move(exec));
  }

  Outcome run(const std::vector<Ids>& prompts, int32_t max_tokens, const std::string& tag = "p") {
    test::SpecRunResult r = test::run_spec_requests(*engine_, prompts, max_tokens, s_.temperature, 77, tag);
    return Outcome{std::move(r.tokens), engine_->scheduler().spec_decode_stats(), r.hits};
  }

 private:
  Setup s_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<Engine> engine_;
};

Outcome run_once(const std::string& kind, const Setup& s, const std::vector<Ids>& prompts, int32_t max_tokens) {
  return MtpEngine(kind, s).run(prompts, max_tokens);
}

std::vector<Ids> prompts(int n, int len = 11) {
  std::vector<Ids> out;
  for (int i = 0; i < n; ++i) out.push_back(test::random_prompt(len + 7 * i, uint64_t(900 + i)));
  return out;
}

TEST(MtpSpecDecode, OracleHeadHasEveryGreedyDraftAcceptedAndChangesNothing) {
  const std::vector<Ids> ps = prompts(2);
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
  KvCache cache(head.kv_cache_spec(1, kBlockSize, DType::F32));
  ForwardBatch b;
  b.max_blocks_per_seq = 1;
  const int32_t block = 0;
  b.add_sequence(&y, 1, 0, &block, 1, kBlockSize, ForwardBatch::Logits::Last);
  std::vector<float> hidden(size_t(m.model->hidden_size()), 0.0f), logits(size_t(m.model->vocab_size()));
  head.forward(b, hidden.data(), cache, logits.data());
  return int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

TEST(MtpSpecDecode, PerturbedHeadGivesThePredictedPartialAcceptanceLosslessly) {
  test::LoadedModel& m = mtp_model("oracle-perturbed");
  const Ids prompt = prompts(1)[0];
  constexpr int32_t kTokens = 30;
  const Outcome plain = run_once("oracle-perturbed", {}, {prompt}, kTokens);
  const Outcome spec = run_once("oracle-perturbed", {.k = 1}, {prompt}, kTokens);
  EXPECT_EQ(plain.tokens, spec.tokens);
  // Replay: after the first token each step drafts g(last) if the throttle and the max_tokens
  // limit allow; the target accepts it iff it is the plain run's next token (f(last)).
  const Ids& out = plain.tokens.at("p0");
  SpecThrottle throttle(1);
  int64_t drafted = 0, accepted = 0;
  for (size_t o = 1; o < out.size();) {
    const int32_t k = std::min<int32_t>(throttle.next_k(), int32_t(kTokens - int64_t(o) - 1));
    if (k <= 0) {
      ++o;
      continue;
    }
    const bool ok = head_choice(m, out[o - 1]) == out[o];
    ++drafted;
    accepted += ok;
    throttle.observe(1, ok);
    o += ok ? 2 : 1;
  }
  EXPECT_EQ(spec.stats.num_draft_tokens, drafted);
  EXPECT_EQ(spec.stats.num_accepted_tokens, accepted);
  EXPECT_GT(accepted, 0);
  EXPECT_LT(accepted, drafted) << "the perturbed head agreed everywhere: not a partial acceptance";
}

TEST(MtpSpecDecode, BatchedChunkedAndPrefixCachedOutputsAreUnchanged) {
  const std::vector<Ids> ps = prompts(3, 20);
  {  // random head weights: drafts mostly rejected, 7-token chunks, a 40-token budget
    const Outcome plain = run_once("random", {}, ps, 10);
    EXPECT_EQ(plain.tokens, run_once("random", {.k = 2, .threshold = 7, .budget = 40}, ps, 10).tokens);
  }
  const Outcome plain = run_once("oracle-perturbed", {}, ps, 12);
  EXPECT_EQ(plain.tokens, run_once("oracle-perturbed", {.k = 2, .threshold = 7, .budget = 40}, ps, 12).tokens);
  MtpEngine cached("oracle-perturbed", {.k = 3, .prefix_caching = true});
  EXPECT_EQ(plain.tokens, cached.run(ps, 12, "p").tokens);
  const Outcome again = cached.run(ps, 12, "p");  // resumes from the prefix cache, the head's context restored
  EXPECT_EQ(plain.tokens, again.tokens);
  EXPECT_GT(again.hits, 0) << "no prefix-cache hit";
  EXPECT_GT(again.stats.num_accepted_tokens, 0);
}

// With the cost model choosing k each step (0 where verifying does not pay, probes, the MTP head
// skipping its rows while off and restarting its context) the output is still the plain run's.
TEST(MtpSpecDecode, TheCostModelChangesOnlySpeed) {
  const std::vector<Ids> ps = prompts(3, 20);
  for (const char* kind : {"random", "oracle", "oracle-perturbed"}) {
    SCOPED_TRACE(kind);
    const Outcome plain = run_once(kind, {}, ps, 40);
    EXPECT_EQ(plain.tokens, run_once(kind, {.k = 3, .cost_model = true}, ps, 40).tokens);
    EXPECT_EQ(plain.tokens, run_once(kind, {.k = 2, .threshold = 7, .budget = 40, .cost_model = true}, ps, 40).tokens);
  }
}

TEST(MtpSpecDecode, SeededSamplingRunsThroughRejectionSampling) {
  const std::vector<Ids> ps = prompts(1);
  const Outcome spec = run_once("oracle-perturbed", {.k = 2, .temperature = 0.8f}, ps, 12);
  for (const auto& [id, t] : spec.tokens) EXPECT_EQ(t.size(), 12u) << id;
  EXPECT_GT(spec.stats.num_draft_tokens, 0);
}

}  // namespace
}  // namespace pypto
