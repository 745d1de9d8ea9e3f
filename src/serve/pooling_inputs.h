#pragma once
// The steps every pooling endpoint takes with its inputs before the engine sees them and with
// the vectors after: tokenize (add_special_tokens), truncate (truncate_prompt_tokens), check the
// length, the count and `dimensions`, and write a vector as floats or base64.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve/pooling_options.h"
#include "serve/pooling_protocol.h"
#include "serve/server_state.h"

namespace pypto {

// The token ids of one input: text through the tokenizer (with its post-processor unless
// add_special_tokens is false: Qwen3-Embedding's appends <|endoftext|>), token ids as given
// (checked against the vocabulary); then cut to `keep` tokens (resolve_truncation). 400 naming
// `param` (the message says `label`, e.g. "input[2]") when it cannot be tokenized, holds an id
// outside the vocabulary, or is still longer than --max-model-len (code context_length_exceeded).
std::vector<int32_t> pooling_token_ids(const ServerState& s, const EmbeddingInput& in, const PoolingOptions& o,
                                       std::optional<int64_t> keep, const std::string& label, const char* param);

// 400 naming `param` when a request has more inputs than can run or wait at once
// (--max-num-seqs x replicas + --max-queued-requests).
void check_input_count(const ServerState& s, size_t n, const char* param);

// 400 naming `dimensions` outside 32..hidden (the Qwen3-Embedding cards' Matryoshka range; the
// hidden size alone for a model narrower than 32).
void check_dimensions(const ServerState& s, std::optional<int64_t> dimensions);

// A pooled vector as the response carries it: cut to `dimensions` and L2-normalised when
// use_activation (default: the model's Normalize module) says so, then floats or base64.
nlohmann::ordered_json embedding_json(const ServerState& s, const std::vector<float>& pooled, const EmbeddingRequest& r);

}  // namespace pypto
