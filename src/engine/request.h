#pragma once
// A request's state inside the engine, in vLLM v1's terms. There are no prefill and decode
// phases: a request has num_tokens (prompt + output) and num_computed_tokens (tokens whose KV is
// in the cache), and every step schedules some of the gap. Chunked prefill, prefix-cache hits
// and recompute after preemption are only different values of num_computed_tokens.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/block_hash.h"
#include "engine/spec_cost_model.h"
#include "engine/spec_throttle.h"
#include "sampling/sampler.h"
#include "sampling/sampling_params.h"

namespace pypto {

namespace structured {
class GrammarMatcher;
}

enum class RequestStatus {
  Waiting,          // queued, holds no blocks
  Running,          // holds blocks, scheduled every step it fits the budget
  Preempted,        // was running; blocks freed, back at the front of the waiting queue
  FinishedStopped,  // eos or a stop token / stop string
  FinishedLength,   // max_tokens or max_model_len reached
  FinishedAborted,  // the client went away or asked to cancel
  FinishedError,    // the engine failed while serving it
};

// The OpenAI finish_reason vocabulary, one mapping for offline and HTTP: stop|length|abort|error.
enum class FinishReason { Stop, Length, Abort, Error };

bool is_finished(RequestStatus s);
std::optional<FinishReason> finish_reason(RequestStatus s);
const char* finish_reason_name(FinishReason r);
const char* request_status_name(RequestStatus s);

struct Request {
  Request(std::string id, std::vector<int32_t> prompt, SamplingParams params,
          std::vector<int32_t> eos_token_ids, uint64_t seed);

  std::string request_id;
  // The API request this is one of n sequences of (the engine sets it when n > 1); empty: a request
  // of its own. The scheduler keeps a group from holding every running slot.
  std::string group_id;
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> output_token_ids;
  std::vector<int32_t> all_token_ids;  // prompt then output: the sequence the KV describes
  SamplingParams sampling_params;
  std::vector<int32_t> eos_token_ids;  // stop the request unless ignore_eos; masked before min_tokens
  uint64_t seed = 0;                   // resolved (params.seed, or drawn by the engine)

  RequestStatus status = RequestStatus::Waiting;
  int64_t num_computed_tokens = 0;
  // Prompt tokens served from the prefix cache when the request was first scheduled.
  std::optional<int64_t> num_cached_tokens;
  int32_t num_preemptions = 0;
  // Chained hashes of the full blocks of all_token_ids computed so far (KVCacheManager extends it).
  std::vector<BlockHash> block_hashes;
  // Logprobs of the output tokens, parallel to output_token_ids when requested.
  std::vector<SampledToken> output_logprobs;
  std::optional<int32_t> stop_token_id;  // the eos / stop token that finished it
  // A pooling request (embedding / score): prefill only. When its last prompt token is computed
  // it finishes (Stop) without a token, and the step's output row for it is its result
  // (engine/engine_pooling.cpp). sampling_params.max_tokens is 0.
  bool pooling = false;
  // Speculative decoding: whether drafts may be proposed for it, and its adaptive draft length.
  bool speculate = true;
  // The sequence's grammar state (structured outputs, tool calls; null: free), owned by the
  // engine, which advances it over verified tokens only: a draft model drafts under its masks.
  std::shared_ptr<const structured::GrammarMatcher> grammar;
  SpecThrottle spec_throttle;
  AcceptanceEstimate spec_acceptance;  // its drafts' per-position acceptance (engine/spec_cost_model.h)
  int32_t spec_step_k = 0;             // the cost model's k for it in the step being scheduled

  int64_t num_prompt_tokens() const { return int64_t(prompt_token_ids.size()); }
  int64_t num_output_tokens() const { return int64_t(output_token_ids.size()); }
  int64_t num_tokens() const { return int64_t(all_token_ids.size()); }
  void append_output_token(int32_t token);
};

}  // namespace pypto
