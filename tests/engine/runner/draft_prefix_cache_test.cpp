// The draft model's prefix cache (engine/draft_kv_blocks.h) over the real Qwen3 forward pass on
// the tiny test model:
//  - a request sharing a long prefix with an earlier one restores the draft's cached blocks and
//    the draft computes only the uncached tail (counted by the drafter), a chat's next turn
//    (prompt + the previous answer + new text) too;
//  - blocks holding KV of rejected drafts are never published: a later request whose prompt is a
//    rejected run of drafts hits only the verified blocks before it;
//  - a draft pool too small to keep everything evicts cached blocks and nothing gets corrupted.
// The tiny model as its own draft must accept every greedy draft: a restored block holding wrong
// KV (another request's, a rejected draft's, an evicted and reused block's) would make it
// disagree. Greedy output is compared with plain decoding (prefix caching on, same request order).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine/draft_model_proposer.h"
#include "engine/request.h"
#include "spec_test_engine.h"
#include "tiny_draft_models.h"

namespace pypto {
namespace {

using Ids = std::vector<int32_t>;

using test::other_model;
using test::target_model;

// Records every proposal handed to the scheduler (with the request's verified tokens then) and
// forwards everything else to the draft model.
class RecordingDrafter final : public DraftProposer {
 public:
  struct Proposal {
    std::string req_id;
    Ids verified;
    Ids drafts;
  };
  explicit RecordingDrafter(std::shared_ptr<DraftModelProposer> inner) : inner_(std::move(inner)) {}
  void propose(std::span<const int32_t> t, int32_t k, std::vector<int32_t>& out) const override {
    inner_->propose(t, k, out);
  }
  void prepare(std::span<const Query> q) override { inner_->prepare(q); }
  void prefill(std::span<const Chunk> c) override { inner_->prefill(c); }
  void propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) override {
    inner_->propose_for(req, k, out);
    // What the draft fed: the verified tokens, then drafts 0 .. k-2 of its whole proposal.
    std::vector<int32_t> all;
    inner_->propose_for(req, 1 << 20, all);
    if (!all.empty()) proposals.push_back({req.request_id, req.all_token_ids, all});
  }
  void forget(const std::string& id) override { inner_->forget(id); }
  void finish(const Request& req) override { inner_->finish(req); }
  void set_context_needed(bool n) override { inner_->set_context_needed(n); }
  const DraftDistribution* distribution(const std::string& id) const override { return inner_->distribution(id); }
  DraftPrefixCacheStats prefix_cache_stats() const override { return inner_->prefix_cache_stats(); }

  std::vector<Proposal> proposals;

 private:
  std::shared_ptr<DraftModelProposer> inner_;
};

struct Drafted {
  std::shared_ptr<DraftModelProposer> drafter;
  std::shared_ptr<RecordingDrafter> recorder;
};

// An engine over the tiny target with prefix caching; with k > 0 a draft model (`draft`) whose
// pool has `draft_blocks` blocks.
std::unique_ptr<test::SpecTestEngine> make_engine(const test::SpecTestSetup& s, test::LoadedModel* draft,
                                                  int64_t draft_blocks, const test::SpecTestPool& pool,
                                                  Drafted* out) {
  Qwen3Model& model = *target_model().model;
  auto attach = [&](EngineConfig& c, KvCache& cache) -> std::unique_ptr<ModelExecutor> {
    c.scheduler.speculative.method = SpeculativeMethod::DraftModel;
    c.scheduler.speculative.draft_model = "(in memory)";
    std::shared_ptr<const Qwen3Weights> w(std::shared_ptr<void>(), &draft->weights);  // borrowed
    out->drafter = std::make_shared<DraftModelProposer>(w, *target_model().backend, draft_blocks, pool.block_size,
                                                        DType::BF16, s.budget, s.prefix_caching);
    out->recorder = std::make_shared<RecordingDrafter>(out->drafter);
    c.drafter = out->recorder;
    return std::make_unique<ModelRunner>(model, cache);
  };
  return std::make_unique<test::SpecTestEngine>(model, s, attach, pool);
}

int64_t draft_computed(const DraftModelProposer& d) { return d.prefill_tokens() + d.catch_up_tokens(); }

Ids concat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const Ids& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

Ids head(const Ids& v, size_t n) { return Ids(v.begin(), v.begin() + ptrdiff_t(std::min(n, v.size()))); }

// A 100-token prompt, then a request sharing its first 96 tokens (6 blocks of 16) and a chat's
// second turn (the prompt, the answer, 20 new tokens): the draft restores what the target's cache
// restores (the second turn: at most one block less, the answer's last block may not be verified
// in the draft yet when the first request finishes) and computes only the rest of each prompt.
TEST(DraftPrefixCache, ARequestSharingAPrefixPrefillsOnlyTheUncachedTailInTheDraft) {
  const test::SpecTestPool pool{.max_seqs = 4, .blocks = 128, .block_size = 16};
  const Ids first = test::random_prompt(100, 31);
  const Ids shared = concat({head(first, 96), test::random_prompt(20, 32)});
  const int32_t max_tokens = 24;

  Drafted none;
  auto plain = make_engine({.k = 0, .prefix_caching = true}, nullptr, 0, pool, &none);
  Drafted d;
  auto spec = make_engine({.k = 3, .prefix_caching = true}, &target_model(), 136, pool, &d);

  const test::SpecTestOutcome p1 = plain->run({first}, max_tokens, "a");
  const test::SpecTestOutcome s1 = spec->run({first}, max_tokens, "a");
  ASSERT_EQ(p1.tokens, s1.tokens);
  EXPECT_EQ(d.drafter->prefix_hit_tokens(), 0);
  EXPECT_EQ(d.drafter->prefill_tokens(), 100);

  const int64_t before = draft_computed(*d.drafter);
  const test::SpecTestOutcome p2 = plain->run({shared}, max_tokens, "b");
  const test::SpecTestOutcome s2 = spec->run({shared}, max_tokens, "b");
  EXPECT_EQ(p2.tokens, s2.tokens);
  EXPECT_EQ(s2.hits, 96) << "the target's prefix cache";
  EXPECT_EQ(d.drafter->prefix_hit_tokens(), 96) << "the draft restores the same 6 blocks";
  // What /metrics exports (pypto:draft_prefix_cache_{queries,hits}_total) through the drafter the
  // scheduler holds: each prompt looked up but its last token (whose row gives draft 0).
  const DraftPrefixCacheStats counted = spec->engine().scheduler().drafter()->prefix_cache_stats();
  EXPECT_EQ(counted.hit_tokens, 96);
  EXPECT_EQ(counted.queried_tokens, (100 - 1) + (116 - 1));
  // The prompt's 20 uncached tokens beside the target's chunk, then 1 or 2 per drafting step.
  EXPECT_EQ(d.drafter->prefill_tokens(), 100 + 20);
  EXPECT_LE(draft_computed(*d.drafter) - before, 20 + 2 * max_tokens);

  // The chat's second turn: the first prompt, its answer, new text.
  const Ids turn2 = concat({first, s1.tokens.at("a0"), test::random_prompt(20, 33)});
  const int64_t hit_before = d.drafter->prefix_hit_tokens(), prefill_before = d.drafter->prefill_tokens();
  const test::SpecTestOutcome p3 = plain->run({turn2}, max_tokens, "c");
  const test::SpecTestOutcome s3 = spec->run({turn2}, max_tokens, "c");
  EXPECT_EQ(p3.tokens, s3.tokens);
  const int64_t draft_hit = d.drafter->prefix_hit_tokens() - hit_before;
  EXPECT_GE(s3.hits, 112) << "the first prompt and most of its answer";
  EXPECT_GE(draft_hit, s3.hits - pool.block_size);
  EXPECT_LE(draft_hit, s3.hits);
  EXPECT_EQ(d.drafter->prefill_tokens() - prefill_before, int64_t(turn2.size()) - draft_hit);

  const SpecDecodeStats st = spec->engine().scheduler().spec_decode_stats();
  EXPECT_GT(st.num_draft_tokens, 0);
  EXPECT_EQ(st.num_accepted_tokens, st.num_draft_tokens) << "restored draft KV that is wrong would disagree";
  EXPECT_EQ(d.drafter->free_blocks(), 136) << "every draft block back in the pool";
}

// Seeded sampled requests after a hit: the same-weights draft's q equals the target's p only if
// the restored blocks hold the KV the target holds for those positions, so every sampled draft
// is accepted (p / q = 1); the run reproduces itself on a fresh engine.
TEST(DraftPrefixCache, SampledRequestsAfterAHitAcceptEveryDraftOfTheSameWeights) {
  const test::SpecTestPool pool{.max_seqs = 4, .blocks = 128, .block_size = 16};
  const Ids first = test::random_prompt(70, 35);
  const std::vector<Ids> second = {concat({head(first, 64), test::random_prompt(12, 36)}),
                                   concat({head(first, 48), test::random_prompt(30, 37)})};
  const test::SpecTestSetup setup{.k = 3, .prefix_caching = true, .temperature = 0.8f};
  std::map<std::string, Ids> outputs[2];
  for (int run = 0; run < 2; ++run) {
    Drafted d;
    auto spec = make_engine(setup, &target_model(), 136, pool, &d);
    const test::SpecTestOutcome a = spec->run({first}, 16, "a");
    const test::SpecTestOutcome b = spec->run(second, 16, "b");
    EXPECT_EQ(b.hits, 64 + 48);
    EXPECT_EQ(d.drafter->prefix_hit_tokens(), 64 + 48) << "run " << run;
    const SpecDecodeStats st = spec->engine().scheduler().spec_decode_stats();
    EXPECT_GT(st.num_draft_tokens, 0);
    EXPECT_EQ(st.num_accepted_tokens, st.num_draft_tokens) << "run " << run;
    outputs[run] = a.tokens;
    outputs[run].insert(b.tokens.begin(), b.tokens.end());
  }
  EXPECT_EQ(outputs[0], outputs[1]) << "seeded requests must reproduce";
}

// Longest common prefix of a and b.
size_t common(const Ids& a, const Ids& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// A draft with other random weights (drafts mostly rejected), k = 4 and 4-token blocks: the draft
// writes KV for drafts 0..2 of each proposal, which often fills a block. For every proposal whose
// first draft was rejected and whose fed drafts fill a block, a later request's prompt is the
// verified tokens then + those drafts + new text: the draft may restore only blocks of verified
// tokens (of the first request or of earlier such requests), never one holding the drafts.
TEST(DraftPrefixCache, BlocksHoldingRejectedDraftsAreNeverPublished) {
  const test::SpecTestPool pool{.max_seqs = 4, .blocks = 256, .block_size = 4};
  const int32_t bs = pool.block_size;
  std::vector<Ids> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(test::random_prompt(21 + 3 * i, uint64_t(41 + i)));
  Drafted d;
  auto spec = make_engine({.k = 4, .prefix_caching = true}, &other_model(), 400, pool, &d);
  const test::SpecTestOutcome first = spec->run(prompts, 40, "a");
  std::vector<Ids> verified;  // every sequence a block may have been published from
  for (size_t i = 0; i < prompts.size(); ++i)
    verified.push_back(concat({prompts[i], first.tokens.at("a" + std::to_string(i))}));

  // Latest proposals first: a request's last drafts are still in the draft's KV when it finishes.
  std::vector<Ids> probes;
  for (auto it = d.recorder->proposals.rbegin(); it != d.recorder->proposals.rend(); ++it) {
    const RecordingDrafter::Proposal& p = *it;
    const Ids& final_tokens = verified[size_t(p.req_id[1] - '0')];
    const size_t n = p.verified.size();
    const size_t fed = p.drafts.size() - 1;  // drafts 0 .. k-2 were written
    if (fed == 0 || n >= final_tokens.size() || p.drafts[0] == final_tokens[n]) continue;
    if ((n + fed) / size_t(bs) == n / size_t(bs)) continue;  // no block filled with a draft
    probes.push_back(concat({p.verified, Ids(p.drafts.begin(), p.drafts.begin() + ptrdiff_t(fed)),
                             test::random_prompt(8, 50 + probes.size())}));
    if (probes.size() == 8) break;
  }
  ASSERT_GE(probes.size(), 2u) << "the random draft should have had rejected runs filling a block";

  Drafted none;
  auto plain = make_engine({.k = 0, .prefix_caching = true}, nullptr, 0, pool, &none);
  plain->run(prompts, 40, "a");
  for (size_t i = 0; i < probes.size(); ++i) {
    size_t longest = 0;
    for (const Ids& v : verified) longest = std::max(longest, common(probes[i], v));
    const int64_t before = d.drafter->prefix_hit_tokens();
    const std::string tag = "probe" + std::to_string(i) + "_";
    const test::SpecTestOutcome s = spec->run({probes[i]}, 3, tag);
    const int64_t hit = d.drafter->prefix_hit_tokens() - before;
    EXPECT_LE(hit, int64_t(longest / size_t(bs)) * bs) << "probe " << i << ": restored a block of rejected drafts";
    EXPECT_GT(hit, 0) << "probe " << i << ": the verified blocks before the drafts";
    EXPECT_EQ(s.tokens, plain->run({probes[i]}, 3, tag).tokens);
    verified.push_back(concat({probes[i], s.tokens.at(tag + "0")}));
  }
}

// A draft pool of 14 blocks of 16 for requests of up to ~110 tokens: cached blocks are evicted
// and reused all the time, by requests batched together under 7-token chunks. The tiny model as
// its own draft still accepts every greedy draft, outputs equal plain decoding's, and the draft's
// cache still serves hits.
TEST(DraftPrefixCache, ATinyDraftPoolEvictsWithoutCorruptingAnything) {
  const test::SpecTestPool pool{.max_seqs = 2, .blocks = 128, .block_size = 16};
  const Ids base = test::random_prompt(64, 61);
  std::vector<std::vector<Ids>> rounds;
  for (int r = 0; r < 4; ++r) {
    rounds.push_back({concat({head(base, size_t(48 + 16 * (r % 2))), test::random_prompt(20 + r, 70 + r)}),
                      test::random_prompt(50 + 5 * r, 80 + r)});
  }
  const test::SpecTestSetup setup{.k = 3, .threshold = 7, .budget = 40, .prefix_caching = true};
  Drafted none, d;
  auto plain = make_engine({.threshold = 7, .budget = 40, .prefix_caching = true}, nullptr, 0, pool, &none);
  auto spec = make_engine(setup, &target_model(), 14, pool, &d);
  for (size_t r = 0; r < rounds.size(); ++r) {
    const std::string tag = "r" + std::to_string(r) + "_";
    EXPECT_EQ(plain->run(rounds[r], 16, tag).tokens, spec->run(rounds[r], 16, tag).tokens) << "round " << r;
  }
  const SpecDecodeStats st = spec->engine().scheduler().spec_decode_stats();
  EXPECT_GT(st.num_draft_tokens, 0);
  EXPECT_EQ(st.num_accepted_tokens, st.num_draft_tokens) << "a corrupted draft block would make the draft disagree";
  EXPECT_GT(d.drafter->prefix_hit_tokens(), 0);
  EXPECT_EQ(d.drafter->free_blocks(), 14);
}

}  // namespace
}  // namespace pypto
