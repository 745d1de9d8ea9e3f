#pragma once
// Pieces the completions and chat handlers share: the token budget against the context length,
// the fan-out of n and prompts into engine sequences, the wait loop with its interruptions
// (client gone, timeout, shutdown), usage and logprobs JSON.
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/generation.h"
#include "serve/openai_protocol.h"

namespace pypto {

// max_tokens for a prompt of `prompt_len` tokens (see GenerationFields). 400
// context_length_exceeded naming prompt tokens, max tokens and the model limit when it cannot fit.
int32_t resolve_max_tokens(const GenerationFields& g, int64_t prompt_len, int64_t max_model_len,
                           const char* prompt_param);

// n sequences per prompt (one engine request with n; the engine gives sequence k seed + k).
void add_sequences(std::vector<SequenceSpec>& specs, const GenerationFields& g, size_t prompt_index,
                   const std::vector<int32_t>& prompt_ids, int32_t max_tokens);

// Polls `gen` until it is done, handing every batch of deltas to `emit` (which returns false when
// the client can no longer be written to). Aborts the generation when the client disconnects,
// the per-request timeout passes or the server shuts down; the abort deltas are emitted too.
// Returns false when the client is gone.
bool drive_generation(ServerState& s, Generation& gen, std::chrono::steady_clock::time_point arrival,
                      const std::function<bool(std::vector<ChoiceDelta>&)>& emit);

nlohmann::ordered_json usage_json(const Generation& gen);

// A non-streaming request whose engine step failed answers 500 (code engine_error) with the
// engine's message instead of partial text; streams end that choice with finish_reason "error".
void throw_engine_error(const std::string& engine_error);

// Per-token logprobs in the legacy completions shape (tokens, token_logprobs, top_logprobs,
// text_offset) and in chat's shape (content: [{token, logprob, bytes, top_logprobs}]).
nlohmann::ordered_json completion_logprobs_json(const Tokenizer& tok, const std::vector<TokenInfo>& tokens,
                                                size_t& text_offset);
nlohmann::ordered_json chat_logprobs_json(const Tokenizer& tok, const std::vector<TokenInfo>& tokens);

// Unix seconds.
int64_t unix_now();

}  // namespace pypto
