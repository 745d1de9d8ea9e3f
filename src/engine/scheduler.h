#pragma once
// The scheduler: which requests compute how many tokens this step.
//
// There are no prefill and decode phases. Each step has one token budget
// (max_num_batched_tokens). Running requests are served first, in order, each getting
// min(its gap num_tokens - num_computed_tokens, long_prefill_token_threshold when chunking,
// remaining budget); then waiting requests are admitted FIFO while budget and max_num_seqs
// allow, starting from their prefix-cache hit. When a running request needs a block and the pool
// has none, the newest running request is preempted (recompute: its blocks are freed and it goes
// back to the front of the waiting queue), repeating until the allocation fits or the request
// itself was the newest. The oldest running request can therefore always advance, so the engine
// never deadlocks; requests that could never fit are rejected by add_request.
//
// Speculative decoding (--speculative-config): a running request in decode (one token to compute)
// may also get up to k drafts from the proposer, scheduled as 1 + k tokens; each later running
// request keeps one token of the budget, so drafts never push a plain decode out of the step.
// A draft model (engine/draft_model_proposer.h) drafts for every decoding request at once at the
// start of schedule() (DraftProposer::prepare), and drops a request's draft KV when it finishes
// or is preempted (DraftProposer::forget). update_from_output then takes the verified run (1 .. k + 1 tokens) and advances
// num_computed_tokens over the accepted tokens only: the KV written at rejected positions lies
// beyond num_computed_tokens, is never published to the prefix cache (cache_blocks stops there)
// and is overwritten by the next step.
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_config.h"
#include "engine/spec_cost_model.h"
#include "engine/kv_cache_manager.h"
#include "engine/prefill_progress.h"
#include "engine/request.h"
#include "engine/draft_proposer.h"
#include "engine/scheduler_output.h"
#include "engine/spec_decode_stats.h"
#include "sampling/sampler.h"

namespace pypto {

// What one step produced for one request (vLLM's EngineCoreOutput).
struct EngineCoreOutput {
  std::string req_id;
  std::vector<int32_t> new_token_ids;
  std::vector<SampledToken> new_logprobs;  // parallel to new_token_ids when logprobs were asked
  std::optional<FinishReason> finish_reason;
  std::optional<int32_t> stop_token_id;  // the eos / stop token that finished it
  int64_t num_prompt_tokens = 0;
  int64_t num_cached_tokens = 0;  // prompt tokens served from the prefix cache
  // This step's verification (engine/spec_request_stats.h): drafts verified and accepted (0, 0
  // when the step verified none), exactly what the engine's counters observed for it.
  int32_t num_draft_tokens = 0;
  int32_t num_accepted_draft_tokens = 0;
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& config, const CacheConfig& cache, BlockHasher hasher = sha256_block_hash);

  // Queues a request. Throws Error, without queueing it, when it could never run: empty prompt,
  // duplicate id, prompt + max_tokens > max_model_len, or more KV blocks than the pool has.
  void add_request(std::unique_ptr<Request> req);
  // The capacity checks of add_request alone (not the duplicate id): const, so a front end can
  // reject a request before it queues it or opens a stream.
  void check_request(const std::string& req_id, int64_t num_prompt_tokens, int64_t max_tokens) const;

  SchedulerOutput schedule();

  // Applies a step: advances num_computed_tokens, publishes computed blocks, appends the sampled
  // tokens (`sampled` is parallel to output.scheduled; rows with samples == false are ignored),
  // and finishes requests on eos, stop tokens, max_tokens or max_model_len (freeing their blocks).
  std::vector<EngineCoreOutput> update_from_output(const SchedulerOutput& output,
                                                   std::span<const SampledToken> sampled);
  // The same with each request's verified run (parallel to output.scheduled, empty for rows with
  // samples == false): for a request that verified k drafts, the accepted drafts then the
  // target's own next token (1 .. k + 1 tokens); otherwise its one sampled token. Tokens are
  // appended one at a time and a stop (eos, stop token, max_tokens, max_model_len) cuts the run
  // right after the token that stops it.
  std::vector<EngineCoreOutput> update_from_output(const SchedulerOutput& output,
                                                   std::span<const std::vector<SampledToken>> runs);

  // Finishes requests for a reason outside the model (abort, stop string, error): their blocks
  // are freed now. Unknown or already finished ids are ignored.
  void finish_requests(std::span<const std::string> req_ids, RequestStatus status);

  const Request* get_request(const std::string& req_id) const;
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  bool has_unfinished_requests() const { return !waiting_.empty() || !running_.empty(); }
  bool has_requests() const { return !requests_.empty(); }
  // The seed's least_pending_tokens load: over unfinished requests, prompt tokens not yet computed
  // plus tokens not yet generated (up to max_tokens).
  int64_t num_pending_tokens() const;

  const SchedulerConfig& config() const { return config_; }
  KVCacheManager& kv_cache_manager() { return kv_; }
  const KVCacheManager& kv_cache_manager() const { return kv_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  // Prompts being prefilled (engine/prefill_progress.h), for /metrics.
  PrefillProgress prefill_progress() const { return prefill_.progress(running_); }
  const SpecDecodeStats& spec_decode_stats() const { return spec_stats_; }
  // The engine's time for step `so` (the forward and the sampling of its rows): steps that only
  // decode feed the speculation cost model.
  void observe_step_seconds(const SchedulerOutput& so, double seconds);
  const SpecCostModel& spec_cost_model() const { return cost_; }
  // Method draft_model: the drafter (engine/draft_model_proposer.h), set once before any request.
  void set_drafter(std::shared_ptr<DraftProposer> drafter);
  // The drafter (null: speculation off, or a draft model not set yet).
  DraftProposer* drafter() const { return proposer_.get(); }
  // How many of a request's proposed drafts are worth verifying (the engine cuts a constrained
  // request's drafts after the first one its grammar forbids, engine/spec_grammar.h). Unset: all.
  using DraftFilter = std::function<size_t(const Request&, std::span<const int32_t> drafts)>;
  void set_draft_filter(DraftFilter filter) { draft_filter_ = std::move(filter); }

 private:
  int64_t cap_new_tokens(int64_t gap, int64_t budget) const;
  void preempt(Request* req, SchedulerOutput& out);
  // Removes a finished request: frees its blocks and forgets it.
  void retire(Request* req, RequestStatus status);
  std::optional<RequestStatus> check_stop(const Request& req) const;
  // Drafts for a running request this step (none unless it is decoding and may speculate), at
  // most `max_drafts`.
  void propose_drafts(Request& req, int64_t max_drafts, std::vector<int32_t>& drafts);
  // The most drafts `req` may get this step before the budget: 0 unless it is decoding and may
  // speculate; else its throttled k, bounded by its max_tokens. `consume`: counts a paused step
  // (once per step, when its drafts are taken; the drafter's look-ahead only peeks).
  int64_t draft_limit(Request& req, bool consume) const;
  // The most drafts `req` could take this step before the cost model: 0 unless it is decoding and
  // may speculate; else its throttle's k, bounded by its max_tokens.
  int64_t draft_cap(const Request& req) const;
  // Chooses this step's k from the running requests (the cost model) and tells the drafter
  // whether to keep its context.
  void choose_step_k();
  // Hands this step's prompt chunks of requests that will draft to a drafter with a model, which
  // prefills them beside the target (DraftProposer::prefill).
  void prefill_drafts(const SchedulerOutput& out);

  SchedulerConfig config_;
  KVCacheManager kv_;
  std::unordered_map<std::string, std::unique_ptr<Request>> requests_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // admission order: the back is the newest
  std::vector<std::string> finished_since_last_step_;
  int64_t num_preemptions_ = 0;
  std::shared_ptr<DraftProposer> proposer_;  // null: speculation off
  DraftFilter draft_filter_;
  SpecDecodeStats spec_stats_;
  // Speculation's measured costs and this step's k (engine/spec_cost_model.h); whether the
  // drafter kept its context in this step and in the step before it.
  SpecCostModel cost_;
  int32_t step_batch_ = 0;  // the step's decoding requests (each request's k: Request::spec_step_k)
  bool step_context_ = true, last_context_ = true;
  PrefillTracker prefill_;
};

}  // namespace pypto
