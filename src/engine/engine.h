#pragma once
// Engine: add_request / abort_request / step around the Scheduler, a ModelExecutor and the
// sampler. Single-threaded; EngineLoop runs it on its own thread for the server.
//
// A request with n > 1 becomes n independent sequences with the same prompt; sequence k draws
// from seed + k. With prefix caching, sequences 1..n-1 are queued only once sequence 0 has
// computed the prompt (its first output), so they find its full prompt blocks in the cache
// instead of computing the prompt n times.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_config.h"
#include "engine/model_executor.h"
#include "engine/scheduler.h"
#include "sampling/sampling_params.h"
#include "structured/matcher.h"

namespace pypto {

struct EngineConfig {
  SchedulerConfig scheduler;
  CacheConfig cache;
  int64_t vocab_size = 0;              // bounds token ids in prompts and sampling params
  // A pooling model (--runner pooling): every request is a pooling request (EngineRequest::pooling)
  // and the executor returns rows of pooled_width floats (model/pooling_head.h) instead of logits.
  // 0: a generate model.
  int64_t pooled_width = 0;
  std::vector<int32_t> eos_token_ids;  // from config.json and generation_config.json
  // --speculative-config method draft_model: the loaded draft (engine/draft_model_proposer.h),
  // required then. Copies of the config share it, so one is given to one engine only.
  std::shared_ptr<DraftProposer> drafter;
};

struct EngineRequest {
  std::string request_id;
  std::vector<int32_t> prompt_token_ids;
  SamplingParams params;
  // When the request reached the engine (vLLM's QUEUED event): EngineLoop::add_request stamps
  // it on the caller's thread, so the wait for the engine thread counts as queueing. Unset:
  // Engine::add_request stamps it.
  std::optional<std::chrono::steady_clock::time_point> arrival_time;
  // Structured outputs / tool calls: the grammar every sequence's output must follow (compiled
  // on the caller's thread, serve/structured_request.cpp) and when it applies. Null: free text.
  std::shared_ptr<const structured::CompiledGrammar> grammar;
  structured::MatcherOptions grammar_options;
  // A pooling request (embedding / score): prefill only, params ignored, n 1. Its one output has
  // `pooled` set and finish reason Stop. Only a pooling engine (pooled_width > 0) takes them.
  bool pooling = false;
};

// Engine-side timestamps of one sequence on the steady clock (vLLM's RequestStateStats), from
// which the server derives the per-request queue / prefill / decode / inference times. Every
// output carries the sequence's times so far, so a consumer that stops reading early (a stop
// string found on the output side, a client gone) still has them up to its last output.
struct RequestTimes {
  std::chrono::steady_clock::time_point arrival{};
  // The step that first scheduled the sequence. A preempted sequence is scheduled again later;
  // only the first scheduling counts, so preemption time belongs to prefill / decode, not queue.
  std::optional<std::chrono::steady_clock::time_point> first_scheduled;
  // When the steps that produced the first and the latest token finished (outputs assembled).
  std::optional<std::chrono::steady_clock::time_point> first_token;
  std::optional<std::chrono::steady_clock::time_point> last_token;
};

// What one step produced for one sequence of a request.
struct RequestOutput {
  std::string request_id;
  int32_t index = 0;  // which of the request's n sequences
  std::vector<int32_t> new_token_ids;
  std::vector<SampledToken> new_logprobs;  // parallel to new_token_ids when logprobs were asked
  std::optional<FinishReason> finish_reason;  // set on the sequence's last output
  std::optional<int32_t> stop_token_id;
  std::string error;  // with FinishReason::Error
  int64_t num_prompt_tokens = 0;
  int64_t num_cached_tokens = 0;
  bool request_finished = false;  // every sequence of the request has finished
  RequestTimes times;             // this sequence's timestamps up to this output
  // This step's verification: drafts verified and accepted (0, 0 without drafts). A front end adds
  // them up per sequence for --per-request-spec-decode-stats (engine/spec_request_stats.h).
  int32_t num_draft_tokens = 0;
  int32_t num_accepted_draft_tokens = 0;
  // A pooling request's result: the executor's row for its last prompt token [pooled_width].
  std::vector<float> pooled;
};

struct EngineStats {
  int64_t steps = 0;
  int64_t scheduled_tokens = 0;
  int64_t generated_tokens = 0;
  int64_t failed_steps = 0;
  int64_t pooled_requests = 0;  // pooling requests finished with a result
  // Wall time of each phase of step(), summed over steps (the --profile report's scheduling,
  // model and sampling layers).
  double schedule_seconds = 0;
  double execute_seconds = 0;
  double sample_seconds = 0;
  double update_seconds = 0;
};

class Engine {
 public:
  Engine(const EngineConfig& config, std::unique_ptr<ModelExecutor> executor);

  // Throws Error naming the problem (sampling parameter, token id, capacity) without changing the
  // engine. Const and safe to call from another thread than the one running the engine.
  void validate_request(const EngineRequest& req) const;
  // Validates, then queues. Throws Error (nothing queued) when invalid or the id is in use.
  void add_request(const EngineRequest& req);
  // Finishes the request's sequences now (all of them, or only sequence `index` of an n > 1
  // request): their KV blocks are free before the next step. The next step() reports each with
  // `reason` (Abort for a client that went away, Stop when a stop string was found on the output
  // side). False when the id is unknown.
  bool finish_request(const std::string& request_id, FinishReason reason = FinishReason::Abort,
                      std::optional<int32_t> index = std::nullopt);

  // Schedules, runs the model, samples, and returns what every request produced.
  std::vector<RequestOutput> step();

  bool has_unfinished_requests() const;
  int64_t num_pending_tokens() const;
  const Scheduler& scheduler() const { return scheduler_; }
  const EngineStats& stats() const { return stats_; }
  const EngineConfig& config() const { return config_; }

 private:
  struct Sequence {
    std::string request_id;
    int32_t index = 0;
    RequestTimes times;
    // The sequence's grammar state: masks its rows before sampling, advanced after (null: free).
    std::shared_ptr<structured::GrammarMatcher> matcher;
  };
  struct Parent {
    std::vector<std::string> seq_ids;
    int32_t num_unfinished = 0;
    // Sequences 1..n-1 waiting for sequence 0's prompt (see the class comment).
    std::vector<std::unique_ptr<Request>> deferred;
  };
  void release_deferred(Parent& parent);
  RequestOutput to_output(const EngineCoreOutput& o, std::chrono::steady_clock::time_point now);
  void finish_sequence(RequestOutput& out);
  // The update of a pooling engine's step (engine/engine_pooling.cpp): no sampling; every
  // request whose prompt is done finishes with its row of `eo`.
  void finish_pooled(const SchedulerOutput& so, const ExecutorOutput& eo, std::vector<RequestOutput>& outs);

  EngineConfig config_;
  std::unique_ptr<ModelExecutor> executor_;
  Scheduler scheduler_;
  std::unordered_map<std::string, Sequence> sequences_;  // sequence id -> its request
  std::unordered_map<std::string, Parent> parents_;
  std::vector<RequestOutput> pending_;  // finished outside a step, reported by the next step()
  std::mt19937_64 seed_source_;
  EngineStats stats_;
  // The step's logits [rows, vocab], kept between steps: a fresh 16 × 151,936-float buffer each
  // step cost page faults and zeroing (~10 ms of a ~75 ms 16-sequence decode step).
  ExecutorOutput step_output_;
};

}  // namespace pypto
