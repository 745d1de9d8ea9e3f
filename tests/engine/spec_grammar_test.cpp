// Grammar-constrained requests under speculative decoding (engine/spec_grammar.h): each row of a
// verify is masked with the grammar state after the drafts before it, a draft the grammar forbids
// is never accepted, and the output (tokens, finish reasons, logprobs) equals the run without
// speculation, greedy and seeded. The fake model's logits rank every token (the prediction
// first, then the ids after it), so where its prediction is forbidden the mask picks another
// token, and a row masked with the wrong state (or not at all) emits a different token.
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "engine/draft_proposer.h"
#include "engine/engine.h"
#include "engine/request.h"
#include "engine/spec_grammar.h"
#include "fake_model.h"
#include "structured/regex.h"

namespace pypto {
namespace {

using testing::FakeModel;
using Ids = std::vector<int32_t>;

constexpr int32_t kVocab = 50;  // ids 0..48 spell a letter, 49 is EOS
constexpr int32_t kEos = kVocab - 1;
constexpr FakeModel::Predictor copy_back = FakeModel::copy_back;  // period 3: drafts always right

std::shared_ptr<const structured::TokenVocab> letters() {
  std::vector<std::string> s;
  for (int i = 0; i < kVocab - 1; ++i) s.push_back(std::string(1, char('a' + i % 26)));
  return structured::TokenVocab::from_strings(s, kVocab, {kEos});
}

std::shared_ptr<const structured::CompiledGrammar> regex_grammar(const std::string& pattern) {
  structured::Grammar g;
  g.root = structured::compile_regex(pattern, structured::RegexMode::FullMatch, false);
  return std::make_shared<const structured::CompiledGrammar>(g, letters());
}

bool allows(const structured::TokenMask* m, int32_t id) { return m && ((*m)[size_t(id) >> 5] >> (id & 31) & 1u); }

TEST(SpecGrammar, EachRowIsMaskedWithTheStateAfterTheDraftsBeforeIt) {
  // Positions alternate [ab] and [cd]: a c b | a — the fourth draft is forbidden.
  structured::GrammarMatcher m(regex_grammar("([ab][cd]){6}"), {});
  const Ids drafts = {0, 2, 1, 0, 3};  // a c b a d
  EXPECT_EQ(grammar_draft_limit(m, drafts), 4u);  // the forbidden draft stays, the one after it goes
  DraftGrammarStates s(m, drafts);
  EXPECT_EQ(s.num_allowed(), 3u);
  EXPECT_EQ(s.num_rows(), 6u);
  for (size_t j = 0; j < 4; ++j) {
    const bool even = j % 2 == 0;
    EXPECT_EQ(allows(s.mask(j), 0), even) << j;    // a
    EXPECT_EQ(allows(s.mask(j), 27), even) << j;   // a (second spelling)
    EXPECT_EQ(allows(s.mask(j), 2), !even) << j;   // c
    EXPECT_FALSE(allows(s.mask(j), 4)) << j;       // e
  }
  EXPECT_FALSE(allows(s.mask(3), drafts[3]));  // row 3 cannot produce the forbidden draft
  EXPECT_EQ(s.mask(4), nullptr);               // rows after it are never emitted
  EXPECT_EQ(s.mask(5), nullptr);
  // The sequence's own matcher did not move.
  EXPECT_TRUE(allows(m.next_mask(), 0));
  EXPECT_FALSE(allows(m.next_mask(), 2));
  // All drafts allowed: all kept.
  EXPECT_EQ(grammar_draft_limit(m, Ids{1, 3, 0}), 3u);
  EXPECT_EQ(grammar_draft_limit(m, Ids{2}), 1u);
  EXPECT_EQ(grammar_draft_limit(m, Ids{}), 0u);
}

// Logits: the prediction first, then the ids after it in order (peaked: 10 over a gentle slope;
// soft: 2 over it, so seeded draws often take other tokens).
class RankingExecutor : public ModelExecutor {
 public:
  RankingExecutor(bool soft, std::map<std::string, std::vector<Ids>>* drafted) : model_(96, 4, kVocab, copy_back), soft_(soft), drafted_(drafted) {}
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    out.vocab_size = kVocab;
    out.logits.clear();
    for (const ScheduledRequest& s : so.scheduled)
      if (s.num_draft_tokens > 0 && drafted_) {
        // The drafts and the position of the first one (for the test's grammar replay).
        Ids d = {int32_t(s.num_computed_tokens + 1)};
        d.insert(d.end(), s.token_ids.end() - s.num_draft_tokens, s.token_ids.end());
        (*drafted_)[s.req_id].push_back(d);
      }
    for (int32_t pred : model_.execute(so))
      for (int32_t x = 0; x < kVocab; ++x) {
        const int32_t rank = (x - pred + kVocab) % kVocab;
        out.logits.push_back(rank == 0 ? (soft_ ? 2.0f : 10.0f) : -0.05f * float(rank));
      }
  }

 private:
  FakeModel model_;
  bool soft_;
  std::map<std::string, std::vector<Ids>>* drafted_;
};

struct Collected {
  std::map<std::string, Ids> tokens;
  std::map<std::string, std::vector<SampledToken>> logprobs;
  std::map<std::string, FinishReason> reasons;
  SpecDecodeStats stats;
  std::map<std::string, std::vector<Ids>> drafted;  // per request, each verify: [position of the first draft, drafts...]
};

Collected run(const std::vector<EngineRequest>& reqs, int32_t k, bool soft) {
  Collected c;
  EngineConfig cfg;
  cfg.scheduler.max_num_batched_tokens = 32;
  cfg.scheduler.long_prefill_token_threshold = 8;
  cfg.scheduler.max_model_len = 96;
  cfg.cache.block_size = 4;
  cfg.cache.num_blocks = 96;
  cfg.vocab_size = kVocab;
  cfg.eos_token_ids = {kEos};
  if (k > 0) {
    cfg.scheduler.speculative.method = SpeculativeMethod::Ngram;
    cfg.scheduler.speculative.num_speculative_tokens = k;
    cfg.scheduler.speculative.cost_model = false;  // the mechanics, with every step drafting
    cfg.scheduler.speculative.prompt_lookup_min = 2;
    cfg.scheduler.speculative.prompt_lookup_max = 4;
  }
  Engine e(cfg, std::make_unique<RankingExecutor>(soft, &c.drafted));
  for (const EngineRequest& r : reqs) e.add_request(r);
  for (int i = 0; i < 2000 && e.has_unfinished_requests(); ++i)
    for (const RequestOutput& o : e.step()) {
      const std::string id = o.request_id + "/" + std::to_string(o.index);
      c.tokens[id].insert(c.tokens[id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
      c.logprobs[id].insert(c.logprobs[id].end(), o.new_logprobs.begin(), o.new_logprobs.end());
      if (o.finish_reason) c.reasons[id] = *o.finish_reason;
    }
  EXPECT_FALSE(e.has_unfinished_requests());
  c.stats = e.scheduler().spec_decode_stats();
  return c;
}

void expect_same(const Collected& plain, const Collected& spec) {
  EXPECT_EQ(plain.tokens, spec.tokens);
  EXPECT_EQ(plain.reasons, spec.reasons);
  ASSERT_EQ(plain.logprobs.size(), spec.logprobs.size());
  for (const auto& [id, lp] : plain.logprobs) {
    const auto& other = spec.logprobs.at(id);
    ASSERT_EQ(lp.size(), other.size()) << id;
    for (size_t i = 0; i < lp.size(); ++i) {
      EXPECT_EQ(lp[i].token_id, other[i].token_id) << id << " " << i;
      EXPECT_EQ(lp[i].logprob, other[i].logprob) << id << " " << i;
      ASSERT_EQ(lp[i].top_logprobs.size(), other[i].top_logprobs.size()) << id << " " << i;
      for (size_t t = 0; t < lp[i].top_logprobs.size(); ++t) {
        EXPECT_EQ(lp[i].top_logprobs[t].token_id, other[i].top_logprobs[t].token_id);
        EXPECT_EQ(lp[i].top_logprobs[t].logprob, other[i].top_logprobs[t].logprob);
      }
    }
  }
}

EngineRequest constrained(const std::string& id, Ids prompt, const std::string& pattern, int32_t max_tokens = 40) {
  EngineRequest r;
  r.request_id = id;
  r.prompt_token_ids = std::move(prompt);
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  r.params.logprobs = 2;
  if (!pattern.empty()) r.grammar = regex_grammar(pattern);
  return r;
}

// Replays the grammar along the output to each verify's drafts: how many drafts were forbidden,
// and whether a forbidden draft was ever followed by another (the scheduler cuts those).
struct ForbiddenDrafts {
  int64_t forbidden = 0;
  bool any_after_forbidden = false;
};
ForbiddenDrafts forbidden_drafts(const Collected& c, const EngineRequest& r) {
  ForbiddenDrafts f;
  const Ids& out = c.tokens.at(r.request_id + "/0");
  for (const Ids& d : c.drafted.at(r.request_id)) {
    const size_t first_out = size_t(d[0]) - r.prompt_token_ids.size();  // output index of draft 0
    structured::GrammarMatcher m(r.grammar, r.grammar_options);
    for (size_t i = 0; i < first_out; ++i) EXPECT_TRUE(m.accept(out[i]));
    for (size_t j = 1; j < d.size(); ++j)
      if (!m.accept(d[j])) {
        ++f.forbidden;
        f.any_after_forbidden |= j + 1 < d.size();
        break;
      }
  }
  return f;
}

TEST(SpecGrammar, ConstrainedGreedyOutputAndLogprobsEqualThePlainRun) {
  // The prompt's cycle a c b is what n-gram drafts copy; the grammar alternates [ab] and [cd], so
  // every third draft or so is forbidden and the target's masked choice replaces it.
  const Ids cycle = {0, 2, 1, 0, 2, 1, 0, 2, 1, 0, 2, 1};
  std::vector<EngineRequest> reqs = {constrained("alt", cycle, "([ab][cd]){10}"),
                                     constrained("abc", {5, 6, 0, 1, 2, 0, 1, 2, 0, 1, 2}, "[abc]{3}([abc]{3})+"),
                                     constrained("cd", cycle, "(a|c|d|ac|cd)+b")};
  reqs.push_back(constrained("free", {3, 4, 5, 3, 4, 5, 3, 4}, ""));  // unconstrained, same batches
  const Collected plain = run(reqs, 0, false);
  const Collected spec = run(reqs, 4, false);
  expect_same(plain, spec);
  EXPECT_EQ(spec.tokens.at("alt/0").size(), 21u);  // twenty letters and EOS
  EXPECT_EQ(spec.reasons.at("alt/0"), FinishReason::Stop);
  EXPECT_GT(spec.stats.num_accepted_tokens, 10);                             // constrained drafts were accepted
  EXPECT_LT(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens);  // and some rejected
  const ForbiddenDrafts f = forbidden_drafts(spec, reqs[0]);
  EXPECT_GT(f.forbidden, 0) << "the test needs drafts the grammar forbids";
  EXPECT_FALSE(f.any_after_forbidden);
}

TEST(SpecGrammar, ConstrainedSeededSamplingEqualsThePlainRun) {
  std::vector<EngineRequest> reqs;
  for (int i = 0; i < 3; ++i) {
    EngineRequest r = constrained("s" + std::to_string(i), {0, 2, 1, 0, 2, 1, 0, 2, 1}, "([ab][cd])+e?", 30);
    r.params.temperature = 0.8f;
    r.params.top_k = 6;
    r.params.repetition_penalty = 1.1f;
    r.params.seed = 11 + i;
    reqs.push_back(r);
  }
  const Collected plain = run(reqs, 0, true);
  const Collected spec = run(reqs, 3, true);
  expect_same(plain, spec);
  EXPECT_GT(spec.stats.num_accepted_tokens, 0);
  EXPECT_LT(spec.stats.num_accepted_tokens, spec.stats.num_draft_tokens);
}

TEST(SpecGrammar, ALazyToolCallGrammarFollowsDraftsAcrossItsTrigger) {
  // Tool-call style: free text until the trigger 'z' (id 25), then [ab][cd][ab] and free again.
  // The prompt's cycle z a a drafts across the trigger into the constrained part.
  EngineRequest r = constrained("tool", {25, 0, 0, 25, 0, 0, 25, 0, 0, 25, 0, 0}, "[ab][cd][ab]", 36);
  r.grammar_options.trigger = 25;
  const Collected plain = run({r}, 0, false);
  const Collected spec = run({r}, 4, false);
  expect_same(plain, spec);
  EXPECT_GT(spec.stats.num_accepted_tokens, 0);
  EXPECT_GT(forbidden_drafts(spec, r).forbidden, 0);
}

// Rejection sampling (a draft model's q) under a grammar. Target: p uniform over a b c d (ids
// 0..3), so under ([ab][cd])+ each position is 1/2 : 1/2 over its two letters. Drafter: q = 1/2
// on the position's first letter X (a or c), 1/2 on a letter the grammar forbids there, drawn
// by a seeded hash. Exact: X is accepted (p/q = 1); the forbidden draft is verified and rejected
// (p = 0), and the residual max(0, p - q) is the other letter: 1/2 : 1/2. Dropping the forbidden
// draft before the verify (sampling that position from p instead of the residual) would give X
// 3/4 of the time; an unmasked row would emit the forbidden letter.
class FlatExecutor : public ModelExecutor {
 public:
  void execute(const SchedulerOutput& so, ExecutorOutput& out) override {
    out.vocab_size = kVocab;
    out.logits.clear();
    for (int64_t r = 0; r < so.num_sampling_rows(); ++r)
      for (int32_t x = 0; x < kVocab; ++x) out.logits.push_back(x < 4 ? 0.0f : -30.0f);
  }
};

class HalfForbiddenDrafter : public DraftProposer {
 public:
  void propose(std::span<const int32_t>, int32_t, std::vector<int32_t>& out) const override { out.clear(); }
  void propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) override {
    out.clear();
    DraftDistribution& q = dists_[req.request_id];
    q.vocab = kVocab;
    q.probs.assign(size_t(k) * kVocab, 0.0f);
    for (int32_t j = 0; j < k; ++j) {
      const size_t pos = req.output_token_ids.size() + size_t(j);  // the output index draft j guesses
      const int32_t x = pos % 2 == 0 ? 0 : 2, forbidden = pos % 2 == 0 ? 2 : 0;
      q.probs[size_t(j) * kVocab + size_t(x)] = 0.5f;
      q.probs[size_t(j) * kVocab + size_t(forbidden)] = 0.5f;
      const uint64_t h = (req.seed * 0x9E3779B97F4A7C15ull) ^ (pos * 0xBF58476D1CE4E5B9ull);
      out.push_back((h >> 29) % 2 == 0 ? x : forbidden);
    }
  }
  const DraftDistribution* distribution(const std::string& req_id) const override {
    auto it = dists_.find(req_id);
    return it == dists_.end() ? nullptr : &it->second;
  }

 private:
  std::map<std::string, DraftDistribution> dists_;
};

TEST(SpecGrammar, RejectionSamplingVerifiesForbiddenDraftsAndKeepsTheTargetsDistribution) {
  EngineConfig cfg;
  cfg.scheduler.max_num_batched_tokens = 1024;  // whole prompts: no draft for a split prompt's last token
  cfg.scheduler.max_num_seqs = 256;
  cfg.scheduler.max_model_len = 32;
  cfg.cache.block_size = 4;
  cfg.cache.num_blocks = 1024;
  cfg.vocab_size = kVocab;
  cfg.eos_token_ids = {kEos};
  cfg.scheduler.speculative.method = SpeculativeMethod::DraftModel;
  cfg.scheduler.speculative.num_speculative_tokens = 1;
  cfg.scheduler.speculative.cost_model = false;
  cfg.scheduler.speculative.draft_model = "(fake)";
  cfg.drafter = std::make_shared<HalfForbiddenDrafter>();
  Engine e(cfg, std::make_unique<FlatExecutor>());
  constexpr int kRequests = 2000;
  auto grammar = regex_grammar("([ab][cd])+");
  for (int i = 0; i < kRequests; ++i) {
    EngineRequest r;
    r.request_id = "r" + std::to_string(i);
    r.prompt_token_ids = {7, 8, 9};
    r.params.temperature = 1.0f;
    r.params.seed = uint64_t(1000 + i);
    r.params.max_tokens = 3;
    r.params.ignore_eos = true;
    r.grammar = grammar;
    e.add_request(r);
  }
  std::map<std::string, Ids> out;
  for (int i = 0; i < 1000 && e.has_unfinished_requests(); ++i)
    for (const RequestOutput& o : e.step()) {
      EXPECT_NE(o.finish_reason, FinishReason::Error) << o.error;
      out[o.request_id].insert(out[o.request_id].end(), o.new_token_ids.begin(), o.new_token_ids.end());
    }
  ASSERT_FALSE(e.has_unfinished_requests());
  const SpecDecodeStats st = e.scheduler().spec_decode_stats();
  EXPECT_EQ(st.num_draft_tokens, kRequests);  // one draft each, at output position 1, forbidden or not
  int64_t c_at_1 = 0;
  for (const auto& [id, t] : out) {
    ASSERT_EQ(t.size(), 3u) << id;
    EXPECT_TRUE(t[0] == 0 || t[0] == 1) << id;
    EXPECT_TRUE(t[1] == 2 || t[1] == 3) << id;
    EXPECT_TRUE(t[2] == 0 || t[2] == 1) << id;
    c_at_1 += t[1] == 2;
  }
  // Half the drafts were c (accepted), half a (forbidden, rejected): acceptance ~1/2.
  EXPECT_NEAR(double(st.num_accepted_tokens) / kRequests, 0.5, 0.05);
  // Binomial(2000, 1/2): sd 0.011; the wrong rule's 3/4 is 20 sd away.
  EXPECT_NEAR(double(c_at_1) / kRequests, 0.5, 0.05);
}

}  // namespace
}  // namespace pypto
