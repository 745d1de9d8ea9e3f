#pragma once
// The draft-model drafter (--speculative-config '{"model": DIR, "num_speculative_tokens": k}'):
// a small Qwen3 sharing the target's vocabulary proposes k tokens per request per step, which the
// target verifies in one (k + 1)-row step.
//
// Its own paged KV cache. The draft keeps, per request, the tokens whose KV it holds and their
// blocks (its own pool, its own block ids, its own prefix cache keyed by the target's block
// hashes: engine/draft_kv_blocks.h). A request new to the draft first restores the longest
// cached chain of its verified tokens, so a prefix-cache hit of the target (a chat's next turn)
// costs the draft only the uncached tail; full blocks of verified tokens are published as they
// are computed (a prompt's after its prefill, the output's as drafts are verified, the rest when
// the request finishes or is preempted). Catching
// up is lazy: at each prepare() the draft compares what it holds with the request's verified
// tokens, keeps the common prefix (that is the rollback: KV past it is simply overwritten, as
// the target's is) and computes the rest: in a steady-state step 1 or 2 tokens (the target's
// token after a rejection, or the last draft and the bonus token after a fully accepted run).
// The prompt is prefilled in the draft chunk by chunk in the steps where the target prefills it
// (prefill(): the same tokens, KV only), so a long prompt costs each of those steps the draft's
// share of its chunk (~4 % for 0.6B drafting for 14B) rather than one long catch-up in the
// request's first decode step that would stall every other request's decode. A catch-up in
// prepare() computes at most kMaxCatchUpTokens per request: a request missing more (speculation
// was off for a stretch, its throttle paused it, prefill() could not take its prompt) keeps what
// the draft holds and feeds only its last tokens after it, skipping the span between
// (engine/draft_token_map.h), so a probe after 1000 plain steps costs a short pass, not a
// 1000-token prefill. Once a draft made after such a skip is accepted (the probe found that
// speculation pays for the request), the next catch-up computes the skipped span after all, so
// the request drafts on with its whole context: only probes that find nothing are cheap.
//
// One step: pass 0 runs every request's catch-up tokens and yields draft 0 from its last row;
// pass j (1 .. k-1) feeds draft j-1 of every request still drafting (one row each) and yields
// draft j. Requests are batched in every pass, so the draft costs k batched forward calls per
// step, not k per request. Draft j is chosen from the draft's row as the target would choose
// from its own (sampler.h, the request's penalties over output + drafts[0..j), and a constrained
// request's grammar mask after drafts[0..j), engine/spec_grammar.h): greedy requests
// take the argmax; sampled requests draw from the processed distribution q (Philox stream
// kDraftStream of the request's seed), which is kept for rejection sampling
// (sampling/rejection_sampler.h).
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/draft_kv_blocks.h"
#include "engine/draft_proposer.h"
#include "engine/draft_token_map.h"
#include "model/forward_batch.h"
#include "model/kv_cache.h"
#include "model/qwen3_model.h"
#include "model/qwen3_weights.h"
#include "structured/matcher.h"

namespace pypto {

class DraftModelProposer final : public DraftProposer {
 public:
  // `weights` (staged draft) and `backend` (the target's rank-0 backend: the draft runs on the
  // same threads, between the target's steps) must outlive the proposer. num_blocks of
  // block_size tokens: the draft's KV pool; prefix_caching: whether it keeps a prefix cache (as
  // the target does: --no-enable-prefix-caching turns off both).
  DraftModelProposer(std::shared_ptr<const Qwen3Weights> weights, Backend& backend, int64_t num_blocks,
                     int32_t block_size, DType kv_dtype, int64_t max_pass_tokens, bool prefix_caching = true);

  // A draft model needs the request, not only its tokens: use prepare() / propose_for().
  void propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const override;
  void prepare(std::span<const Query> queries) override;
  void prefill(std::span<const Chunk> chunks) override;
  void propose_for(const Request& req, int32_t k, std::vector<int32_t>& out) override;
  void forget(const std::string& req_id) override;
  // Publishes the request's verified full blocks, then forgets it.
  void finish(const Request& req) override;
  const DraftDistribution* distribution(const std::string& req_id) const override;

  // Blocks held by no request (cached ones among them until evicted).
  int64_t free_blocks() const { return kv_.free_blocks(); }
  const DraftKvBlocks& kv_blocks() const { return kv_; }
  // Turns the draft's prefix cache off (on only where the target's is): for comparisons.
  void set_prefix_cache(bool on) { kv_.set_enabled(on); }
  // Tokens the draft computed for verified positions: in prefill() beside the target's chunks,
  // and in prepare()'s catch-up (pass 0), in all and at most in one prepare(); and those
  // restored from the draft's prefix cache instead (kv_blocks().hit_tokens()).
  int64_t prefill_tokens() const { return prefill_tokens_; }
  int64_t prefix_hit_tokens() const { return kv_.hit_tokens(); }
  DraftPrefixCacheStats prefix_cache_stats() const override { return {kv_.queried_tokens(), kv_.hit_tokens()}; }
  int64_t catch_up_tokens() const { return catch_up_tokens_; }
  int64_t max_step_catch_up_tokens() const { return max_step_catch_up_tokens_; }
  // The most tokens prepare() catches up per request (engine/draft_token_map.h): a request
  // missing more (after speculation was off, or a prompt prefill() could not take) skips all but
  // the last ones, until a draft made after the skip is accepted. Verified tokens skipped so far,
  // in all, and skipped spans computed after all (their drafts were accepted).
  static constexpr int64_t kMaxCatchUpTokens = 16;
  void set_max_catch_up_tokens(int64_t n) { max_catch_up_ = std::max<int64_t>(1, n); }
  int64_t skipped_tokens() const { return skipped_tokens_; }
  int64_t filled_gaps() const { return filled_gaps_; }
  const Qwen3Model& model() const { return *model_; }

  // Where the draft's forward passes run. Default: on the calling thread (the engine's), whose
  // pool `backend` is. Under --pp-virtual-engines `backend` is the step pipeline's stage-0 pool,
  // which only the pipeline thread drives: `run_on` queues each pass there (between the engines'
  // steps) and returns when it has run (parallel/replicas/step_pipeline.h run_on_stage0).
  using RunOn = std::function<void(const std::function<void()>&)>;
  void set_run_on(RunOn run_on) { run_on_ = std::move(run_on); }
  // Keeps `backend` (the constructor's) alive as long as the proposer: the drafter of a --dp
  // replica whose ranks are other processes gets a pool of its own in rank 0's process.
  void own_backend(std::unique_ptr<Backend> backend) { own_backend_ = std::move(backend); }

 private:
  struct State {
    DraftKvBlocks::Seq seq;       // draft KV blocks, in position order
    std::vector<int32_t> cached;  // the tokens whose KV the draft holds (positions 0..)
    DraftTokenMap map;            // which verified token each position holds (a skipped span)
    int64_t drafted_at = -1;      // the token index the last proposal's first draft was for
    int32_t first_draft = -1;     // and that draft
    std::vector<int32_t> drafts;  // this step's proposal
    DraftDistribution dist;       // sampled requests: q of each draft
  };
  struct Job {
    const Request* req;
    State* st;
    int32_t k;
    // A constrained request's grammar state along this step's drafts (a copy: drafts are not
    // verified tokens), so each draft is chosen under the mask the target's row will apply.
    std::optional<structured::GrammarMatcher> grammar;
  };
  // Pass 0 (catch-up) and passes 1 .. k-1 over the requests of this step (class comment).
  void run_passes(std::span<Job> jobs);
  // Keeps the prefix of st.cached[0, limit) that equals the request's verified tokens (the
  // rollback; KV past it is overwritten). A state holding no blocks first restores what the
  // prefix cache has of tokens [0, limit).
  void sync(const Request& req, State& st, size_t limit);
  // Publishes st's full blocks of verified tokens below `limit`.
  void publish(const Request& req, State& st, size_t limit);
  // Drops st's blocks and tokens (after a failed pass: which KV got written is unknown).
  void reset(State& st);
  // Picks draft j of `req` from the draft's logits row (modified): see the class comment.
  int32_t choose(const Request& req, State& st, std::optional<structured::GrammarMatcher>& grammar,
                 std::span<float> logits);
  // Runs batch_ and returns its logits rows.
  void forward();

  std::unique_ptr<Backend> own_backend_;  // declared first: the model below runs on it
  RunOn run_on_;
  std::shared_ptr<const Qwen3Weights> weights_;
  std::unique_ptr<Qwen3Model> model_;
  KvCache cache_;
  int32_t block_size_;
  int64_t max_pass_tokens_;
  DraftKvBlocks kv_;
  std::unordered_map<std::string, State> states_;
  ForwardBatch batch_;
  std::vector<float> logits_;  // [rows of batch_, vocab]
  bool warned_short_ = false;
  int64_t prefill_tokens_ = 0, catch_up_tokens_ = 0, max_step_catch_up_tokens_ = 0;
  int64_t max_catch_up_ = kMaxCatchUpTokens, skipped_tokens_ = 0, filled_gaps_ = 0;
};

}  // namespace pypto
