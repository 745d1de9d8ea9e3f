#pragma once
// A drafter for speculative decoding: given a request's verified tokens (prompt + output so far),
// it proposes up to k tokens that the target model will verify in one (k + 1)-row step. Drafters
// see only verified tokens, so a rejected draft never feeds a later proposal.
//
// Two drafters: n-gram prompt lookup (engine/ngram_proposer.h: stateless, propose() only) and a
// draft model (engine/draft_model_proposer.h: its own KV cache per request, so it also takes the
// per-step hooks below). EAGLE heads or MTP layers would implement this interface too.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/spec_decode_stats.h"

namespace pypto {

struct Request;

// A draft model's sampling distributions for the drafts it proposed to one request: q[j] is the
// distribution draft j was drawn from ([k, vocab] row-major), for rejection sampling
// (sampling/rejection_sampler.h). Empty for greedy requests (their drafts are argmaxes).
struct DraftDistribution {
  int64_t vocab = 0;
  std::vector<float> probs;  // [num drafts, vocab]
  bool empty() const { return probs.empty(); }
};

class DraftProposer {
 public:
  virtual ~DraftProposer() = default;
  // Appends 0 .. k proposed tokens to `out` (cleared first). Must be deterministic: the same
  // tokens give the same proposal, so runs are reproducible.
  virtual void propose(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>& out) const = 0;

  // Drafters with state per request (a draft model). The scheduler calls, each step:
  //   prepare(requests that may get drafts, the k each may get) once, before scheduling them, so a
  //   model drafts for the whole batch in k batched passes; then propose_for() per request, which
  //   returns (a prefix of) what prepare computed; and forget() for every request that finished
  //   or was preempted (its draft KV is freed). Stateless drafters keep the defaults.
  struct Query {
    const Request* request = nullptr;
    int32_t k = 0;
  };
  virtual void prepare(std::span<const Query> queries) { (void)queries; }
  // The prompt chunks (or a preempted request's recompute chunks) the target computes this step:
  // tokens [0, end) of request->all_token_ids will have the target's KV after it. A drafter with
  // a model computes the same positions now (after scheduling, before the target's forward), so
  // a long prompt is prefilled in the draft chunk by chunk beside the target's prefill rather
  // than all at once in the request's first drafting step, which would stall every other
  // request's decode for that step.
  struct Chunk {
    const Request* request = nullptr;
    int64_t end = 0;
  };
  virtual void prefill(std::span<const Chunk> chunks) { (void)chunks; }
  virtual void propose_for(const Request& req, int32_t k, std::vector<int32_t>& out);
  virtual void forget(const std::string& req_id) { (void)req_id; }
  // The request finished or is preempted now (its num_computed_tokens still those the target
  // verified): a drafter whose context is shared through the prefix cache (MTP) publishes what of
  // it is final, then forgets the request.
  virtual void finish(const Request& req);
  // Once, before any request: the target's KV pool has `num_blocks` blocks (ids [0, num_blocks)).
  // A drafter whose KV lives beside the target's, in the same block ids (MTP), learns which ids of
  // its own pool are its private lookahead blocks.
  virtual void set_target_kv_blocks(int64_t num_blocks) { (void)num_blocks; }
  // Set before each step's prepare(): whether the drafter should keep its per-request context up
  // to date during this step (engine/spec_cost_model.h: false while speculation does not pay and
  // no probe is near). A drafter that skips its work then restarts or catches up its context
  // when it drafts again.
  virtual void set_context_needed(bool needed) { (void)needed; }
  // The drafter's own prefix cache (the draft model's): tokens looked up and found, in all.
  virtual DraftPrefixCacheStats prefix_cache_stats() const { return {}; }
  // The distributions of the drafts propose_for() last returned to `req_id` (null: none, e.g. a
  // greedy request or a drafter without probabilities, such as n-gram). Valid until the next
  // prepare().
  virtual const DraftDistribution* distribution(const std::string& req_id) const {
    (void)req_id;
    return nullptr;
  }
};

}  // namespace pypto
