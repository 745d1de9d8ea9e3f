// Draft-model speculative decoding over the real Qwen3 forward pass (tiny random-weight
// checkpoints, CPU kernels): the draft (engine/draft_model_proposer.h) proposes k tokens per
// request per step from its own paged KV cache, the target verifies them in its ordinary batched
// step.
//  - A draft that is the target's own checkpoint proposes exactly the target's choices, so every
//    greedy draft is accepted (and every sampled one: p == q makes p/q = 1), which reaches the
//    accept path, the bonus token and the draft's catch-up of 2 tokens after a full run.
//  - A draft with other random weights is mostly rejected, which reaches the rollback of the
//    draft's KV; greedy output must stay identical to plain decoding in both cases (alone,
//    batched with chunked prefill, under preemption).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <utility>

#include "engine/draft_model_proposer.h"
#include "engine/engine.h"
#include "engine/model_runner.h"
#include "structured/json_schema.h"
#include "tokenizer/tokenizer.h"
#include "model_harness.h"
#include "tiny_draft_models.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;
constexpr int32_t kBlockSize = 16;

using test::other_model;
using test::target_model;

enum class Draft { None, Same, Other };

struct RunSetup {
  Draft draft = Draft::None;
  int32_t k = 3;
  int64_t threshold = 2048;
  int64_t budget = 4096;
  int32_t num_blocks = 128;
  float temperature = 0.0f;
  std::optional<uint64_t> seed;
  std::shared_ptr<const structured::CompiledGrammar> grammar;  // every request's, when set
};

struct Result {
  std::map<std::string, Ids> tokens;
  SpecDecodeStats stats;
  int64_t preemptions = 0;
  int64_t draft_free_blocks = -1;  // after the run: every draft block back in the pool
  int64_t draft_blocks = 0;
  int64_t prefill_tokens = 0, catch_up_tokens = 0, max_step_catch_up_tokens = 0;  // the drafter's
};

Result run(const RunSetup& s, const std::vector<Ids>& prompts, int32_t max_tokens) {
  Qwen3Model& model = *target_model().model;
  KvCache cache(model.kv_cache_spec(s.num_blocks, kBlockSize, DType::BF16));
  EngineConfig c;
  c.scheduler.max_num_batched_tokens = s.budget;
  c.scheduler.long_prefill_token_threshold = s.threshold;
  c.scheduler.max_model_len = 512;
  c.cache.block_size = kBlockSize;
  c.cache.num_blocks = s.num_blocks;
  c.vocab_size = model.vocab_size();
  std::shared_ptr<DraftModelProposer> drafter;
  Result out;
  if (s.draft != Draft::None) {
    c.scheduler.speculative.method = SpeculativeMethod::DraftModel;
    c.scheduler.speculative.num_speculative_tokens = s.k;
    c.scheduler.speculative.cost_model = false;  // the mechanics, with every step drafting
    c.scheduler.speculative.draft_model = "(in memory)";
    test::LoadedModel& d = s.draft == Draft::Same ? target_model() : other_model();
    // The harness owns the weights; the proposer only borrows them (aliasing, no deleter).
    std::shared_ptr<const Qwen3Weights> w(std::shared_ptr<void>(), &d.weights);
    out.draft_blocks = s.num_blocks + 8;
    drafter = std::make_shared<DraftModelProposer>(w, *target_model().backend, out.draft_blocks, kBlockSize,
                                                   DType::BF16, s.budget);
    c.drafter = drafter;
  }
  Engine engine(c, std::make_unique<ModelRunner>(model, cache));
  for (size_t i = 0; i < prompts.size(); ++i) {
    EngineRequest r;
    r.request_id = "p" + std::to_string(i);
    r.prompt_token_ids = prompts[i];
    r.params.temperature = s.temperature;
    if (s.temperature > 0) {
      r.params.top_k = 50;
      r.params.top_p = 0.95f;
      r.params.presence_penalty = 0.3f;
    }
    if (s.seed) r.params.seed = *s.seed + i;
    r.params.max_tokens = max_tokens;
    r.params.ignore_eos = true;
    r.grammar = s.grammar;
    engine.add_request(r);
  }
  for (int step = 0; step < 10000 && engine.has_unfinished_requests(); ++step)
    for (const RequestOutput& o : engine.step()) {
      EXPECT_NE(o.finish_reason, FinishReason::Error) << o.error;
      Ids& t = out.tokens[o.request_id];
      t.insert(t.end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  out.stats = engine.scheduler().spec_decode_stats();
  out.preemptions = engine.scheduler().num_preemptions();
  if (drafter) {
    out.draft_free_blocks = drafter->free_blocks();
    out.prefill_tokens = drafter->prefill_tokens();
    out.catch_up_tokens = drafter->catch_up_tokens();
    out.max_step_catch_up_tokens = drafter->max_step_catch_up_tokens();
  }
  return out;
}

std::vector<Ids> prompts(int n, int base_len = 9) {
  std::vector<Ids> out;
  for (int i = 0; i < n; ++i) out.push_back(test::random_prompt(base_len + 13 * i, uint64_t(700 + i)));
  return out;
}

TEST(DraftModelRunner, TheTargetAsItsOwnDraftAcceptsEveryGreedyDraft) {
  const std::vector<Ids> ps = prompts(3);
  const Result plain = run({}, ps, 20);
  const Result spec = run({.draft = Draft::Same, .k = 3}, ps, 20);
  EXPECT_EQ(plain.tokens, spec.tokens);
  EXPECT_GT(spec.stats.num_draft_tokens, 0);
  EXPECT_EQ(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens) << "acceptance must be 100 %";
  EXPECT_EQ(spec.draft_free_blocks, spec.draft_blocks) << "finished requests' draft KV blocks were not freed";
}

TEST(DraftModelRunner, AnotherRandomDraftIsMostlyRejectedAndGreedyOutputIsUnchanged) {
  const std::vector<Ids> ps = prompts(3);
  const Result plain = run({}, ps, 20);
  const Result spec = run({.draft = Draft::Other, .k = 4}, ps, 20);
  EXPECT_EQ(plain.tokens, spec.tokens);
  EXPECT_GT(spec.stats.num_draft_tokens, 0);
  EXPECT_LT(spec.stats.num_accepted_tokens * 2, spec.stats.num_draft_tokens) << "a random draft should rarely agree";
}

TEST(DraftModelRunner, ChunkedPrefillBatchesAndPreemptionKeepGreedyOutput) {
  const std::vector<Ids> ps = prompts(5, 20);
  const Result plain = run({}, ps, 16);
  // 7-token chunks, a 40-token budget (drafts cut by it), and a pool of 12 blocks for five
  // requests of 36..88 tokens: preemption drops and rebuilds the draft's KV too.
  for (Draft d : {Draft::Same, Draft::Other}) {
    const Result spec = run({.draft = d, .k = 3, .threshold = 7, .budget = 40, .num_blocks = 12}, ps, 16);
    EXPECT_EQ(plain.tokens, spec.tokens) << (d == Draft::Same ? "same" : "other") << " draft";
    EXPECT_GT(spec.preemptions, 0);
    EXPECT_GT(spec.stats.num_draft_tokens, 0);
    if (d == Draft::Same) EXPECT_EQ(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens);
  }
}

// The draft prefills each prompt in the steps where the target prefills it (8-token chunks), so
// no drafting step catches up more than the 1 or 2 tokens a verify leaves (a lazy draft would
// catch up a whole prompt of 40..66 tokens in its first drafting step, stalling the batch).
TEST(DraftModelRunner, TheDraftPrefillsPromptsInsideTheTargetsChunks) {
  const std::vector<Ids> ps = prompts(3, 40);
  const Result plain = run({}, ps, 12);
  const Result spec = run({.draft = Draft::Same, .k = 3, .threshold = 8, .budget = 64}, ps, 12);
  EXPECT_EQ(plain.tokens, spec.tokens);
  EXPECT_EQ(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens);
  int64_t prompt_tokens = 0;
  for (const Ids& p : ps) prompt_tokens += int64_t(p.size());
  EXPECT_EQ(spec.prefill_tokens, prompt_tokens);
  EXPECT_GT(spec.catch_up_tokens, 0);
  EXPECT_LE(spec.max_step_catch_up_tokens, 2 * int64_t(ps.size()));
}

// Structured output under a draft model, with the real tokenizer's vocabulary: a JSON schema's
// mask applies at every verify row (engine/spec_grammar.h) and at every draft the draft model
// chooses; greedy output equals plain decoding's, with a draft that agrees or mostly does not.
TEST(DraftModelRunner, AJsonSchemaRequestSpeculatesWithUnchangedGreedyOutput) {
  const std::string dir = test::ensure_test_model("tiny", TestModelOptions{});
  const auto tok = Tokenizer::load(dir);
  const auto vocab = structured::TokenVocab::build(*tok, target_model().model->vocab_size(), {151645, 151643});
  const nlohmann::json schema = nlohmann::json::parse(
      R"({"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"}},
          "required": ["name", "n"]})");
  const auto grammar = std::make_shared<const structured::CompiledGrammar>(
      structured::json_schema_grammar(schema, "response_format"), vocab);
  const std::vector<Ids> ps = prompts(2);
  const Result plain = run({.grammar = grammar}, ps, 24);
  for (Draft d : {Draft::Same, Draft::Other}) {
    const Result spec = run({.draft = d, .k = 3, .threshold = 7, .grammar = grammar}, ps, 24);
    EXPECT_EQ(plain.tokens, spec.tokens) << (d == Draft::Same ? "same" : "other") << " draft";
    EXPECT_GT(spec.stats.num_draft_tokens, 0);
    // The draft chooses under the same masks: the target as its own draft agrees every time (an
    // unmasked draft of this random model is almost always outside the grammar: 0 of 16 accepted).
    if (d == Draft::Same) EXPECT_EQ(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens);
    else EXPECT_LT(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens);
  }
  // The output is the schema's JSON (24 tokens may end inside it): an object opens it.
  for (const auto& [id, t] : plain.tokens) {
    const std::string text = tok->decode(t);
    const size_t first = text.find_first_not_of(" \t\r\n");
    ASSERT_NE(first, std::string::npos) << id;
    EXPECT_EQ(text[first], '{') << id << ": " << text;
  }
}

TEST(DraftModelRunner, SampledRequestsAreReproducibleAndASameDraftIsAlwaysAccepted) {
  const std::vector<Ids> ps = prompts(3);
  const RunSetup same{.draft = Draft::Same, .k = 3, .temperature = 0.9f, .seed = 42};
  const Result a = run(same, ps, 16), b = run(same, ps, 16);
  EXPECT_EQ(a.tokens, b.tokens) << "a seeded request must be reproducible run to run";
  EXPECT_GT(a.stats.num_draft_tokens, 0);
  EXPECT_EQ(a.stats.num_accepted_tokens, a.stats.num_draft_tokens) << "p == q: p/q = 1 accepts every draft";
  const RunSetup other{.draft = Draft::Other, .k = 3, .temperature = 0.9f, .seed = 42};
  const Result c = run(other, ps, 16), d = run(other, ps, 16);
  EXPECT_EQ(c.tokens, d.tokens);
  EXPECT_LT(c.stats.num_accepted_tokens, c.stats.num_draft_tokens);
  for (const auto& [id, t] : c.tokens) EXPECT_EQ(t.size(), 16u) << id;
}

// Tokens emitted by rejection sampling (accepted drafts and the bonus token) carry the target's
// raw logprobs, as plain decoding reports them: checked against one teacher-forced forward pass
// over prompt + output (logits of every row).
TEST(DraftModelRunner, RejectionSampledTokensCarryTheTargetsLogprobs) {
  Qwen3Model& model = *target_model().model;
  const Ids prompt = test::random_prompt(17, 950);
  KvCache cache(model.kv_cache_spec(64, kBlockSize, DType::BF16));
  EngineConfig c;
  c.scheduler.max_model_len = 512;
  c.cache.block_size = kBlockSize;
  c.cache.num_blocks = 64;
  c.vocab_size = model.vocab_size();
  c.scheduler.speculative.method = SpeculativeMethod::DraftModel;
  c.scheduler.speculative.num_speculative_tokens = 3;
  c.scheduler.speculative.cost_model = false;
  c.scheduler.speculative.draft_model = "(in memory)";
  std::shared_ptr<const Qwen3Weights> w(std::shared_ptr<void>(), &other_model().weights);
  c.drafter = std::make_shared<DraftModelProposer>(w, *target_model().backend, 72, kBlockSize, DType::BF16, 4096);
  Engine engine(c, std::make_unique<ModelRunner>(model, cache));
  EngineRequest r;
  r.request_id = "lp";
  r.prompt_token_ids = prompt;
  r.params.temperature = 0.8f;
  r.params.seed = 11;
  r.params.max_tokens = 12;
  r.params.ignore_eos = true;
  r.params.logprobs = 2;
  engine.add_request(r);
  Ids out;
  std::vector<SampledToken> lps;
  while (engine.has_unfinished_requests())
    for (const RequestOutput& o : engine.step()) {
      out.insert(out.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      lps.insert(lps.end(), o.new_logprobs.begin(), o.new_logprobs.end());
    }
  ASSERT_EQ(out.size(), 12u);
  ASSERT_EQ(lps.size(), out.size());
  EXPECT_GT(engine.scheduler().spec_decode_stats().num_draft_tokens, 0);

  Ids seq = prompt;
  seq.insert(seq.end(), out.begin(), out.end());
  KvCache ref_cache(model.kv_cache_spec(8, kBlockSize, DType::BF16));
  const Ids blocks = {0, 1, 2, 3, 4, 5, 6, 7};
  ForwardBatch b;
  b.max_blocks_per_seq = 8;
  b.add_sequence(seq.data(), int32_t(seq.size()), 0, blocks.data(), 8, kBlockSize, ForwardBatch::Logits::All);
  const size_t V = size_t(model.vocab_size());
  std::vector<float> logits(seq.size() * V);
  model.forward(b, ref_cache, logits.data());
  for (size_t i = 0; i < out.size(); ++i) {
    const float* row = logits.data() + (prompt.size() - 1 + i) * V;
    double max = row[0], sum = 0;
    for (size_t v = 0; v < V; ++v) max = std::max(max, double(row[v]));
    for (size_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - max);
    const double want = double(row[size_t(out[i])]) - max - std::log(sum);
    EXPECT_NEAR(lps[i].logprob, want, 1e-3) << "token " << i;
    EXPECT_EQ(lps[i].token_id, out[i]);
    EXPECT_EQ(lps[i].top_logprobs.size(), 2u) << "token " << i;
  }
}

// The draft's KV rollback: after a step that rejected some drafts (or accepted all of them and
// added the bonus token), the drafter keeps the KV it shares with the verified tokens and
// computes the rest; its next proposal must equal that of a fresh drafter that computes
// everything from scratch. Drafts of the other random model, greedy and sampled.
TEST(DraftModelRunner, ProposalsAfterARollbackEqualAFreshDraftersProposals) {
  std::shared_ptr<const Qwen3Weights> w(std::shared_ptr<void>(), &other_model().weights);
  Backend& backend = *target_model().backend;
  auto make = [&] {
    auto d = std::make_unique<DraftModelProposer>(w, backend, 32, kBlockSize, DType::BF16, 4096);
    d->set_max_catch_up_tokens(1 << 20);  // every token computed (the bounded catch-up: draft_catch_up_test)
    return d;
  };
  auto propose = [](DraftModelProposer& d, const Request& r, int32_t k) {
    const DraftProposer::Query q{&r, k};
    d.prepare(std::span<const DraftProposer::Query>(&q, 1));
    std::vector<int32_t> out;
    d.propose_for(r, k, out);
    std::vector<float> probs;
    if (const DraftDistribution* dist = d.distribution(r.request_id)) probs = dist->probs;
    return std::make_pair(out, probs);
  };
  // Appends verified tokens to a request as the scheduler would.
  auto extend = [](Request& r, const Ids& tokens) {
    for (int32_t t : tokens) {
      r.output_token_ids.push_back(t);
      r.all_token_ids.push_back(t);
    }
  };
  for (const float temperature : {0.0f, 0.9f}) {
    SCOPED_TRACE(temperature);
    SamplingParams sp;
    sp.temperature = temperature;
    sp.max_tokens = 64;
    Request req("r", test::random_prompt(21, 900), sp, {}, 5);
    auto kept = make();
    constexpr int32_t k = 4;
    for (int round = 0; round < 4; ++round) {
      const auto [drafts, probs] = propose(*kept, req, k);
      ASSERT_EQ(drafts.size(), size_t(k));
      auto fresh = make();
      const auto [fresh_drafts, fresh_probs] = propose(*fresh, req, k);
      EXPECT_EQ(drafts, fresh_drafts) << "round " << round;
      EXPECT_EQ(probs, fresh_probs) << "round " << round;
      EXPECT_EQ(probs.empty(), temperature == 0.0f);
      // Verify: rounds 0 and 2 accept two drafts then a token the draft did not propose; rounds
      // 1 and 3 accept all four and a bonus token.
      Ids verified(drafts.begin(), drafts.begin() + (round % 2 == 0 ? 2 : k));
      verified.push_back((drafts.back() + 1) % 151643);
      extend(req, verified);
    }
  }
}

}  // namespace
}  // namespace pypto
