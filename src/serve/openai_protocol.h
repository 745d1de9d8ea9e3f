#pragma once
// OpenAI request bodies (JSON) -> native structs, validated field by field. This is where JSON
// stops: the handlers work on these structs, the engine sees only EngineRequest.
//
// Every error is an ApiError (400) naming the field in `param` and in the message. Fields we do
// not implement and that would change the output are rejected by name; fields that cannot change
// the output are accepted and ignored (kIgnoredFields, listed in docs/api.md).
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sampling/sampling_params.h"
#include "serve/api_error.h"

namespace pypto {

// One prompt of a completions request: text to tokenize, or token ids given by the client.
struct PromptInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> token_ids;
};

// What completions and chat share.
struct GenerationFields {
  std::optional<std::string> model;  // absent or null: the served model
  // vLLM's request_id (1-256 characters): the response's id becomes "cmpl-" / "chatcmpl-" + it.
  // The engine keeps its own unique ids, so two requests may give the same one.
  std::optional<std::string> request_id;
  SamplingParams params;             // params.n stays 1: the server fans n out (see generation.h)
  int32_t n = 1;
  // Token budget. max_tokens_is_default: it came from --generate-config or the built-in default
  // and is clamped to the room the prompt leaves instead of rejecting the request.
  // nullopt: explicit null, i.e. all the room the prompt leaves.
  std::optional<int32_t> max_tokens;
  bool max_tokens_is_default = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool skip_special_tokens = true;
  // Structured outputs, shape-checked here and compiled by serve/structured_request.cpp: null,
  // or response_format {"type": "json_object" | "json_schema", ...} ({"type": "text"} -> null),
  // or vLLM's structured_outputs {json | regex | choice | grammar | json_object}. Never both.
  nlohmann::ordered_json response_format;
  nlohmann::ordered_json structured_outputs;
};

struct CompletionRequest : GenerationFields {
  std::vector<PromptInput> prompts;
  bool echo = false;
};

struct ChatRequest : GenerationFields {
  // Normalised for the chat template: content is always a string (text parts joined by "\n",
  // null -> ""), "developer" becomes "system". Key order is kept.
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;  // null when absent or tool_choice is "none"; each entry checked
  // "none" | "auto" | "required" | {"type": "function", "function": {"name": N}} (N is in tools);
  // defaults to "auto" with tools, "none" without.
  nlohmann::ordered_json tool_choice = "none";
  bool parallel_tool_calls = true;
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;
  bool include_reasoning = true;
  bool logprobs = false;  // chat's logprobs is a bool; top_logprobs the alternatives
};

// The built-in default of max_tokens when neither the request nor --generate-config sets it
// (the seed's max_new_tokens default), clamped to the room the prompt leaves.
inline constexpr int32_t kDefaultMaxTokens = 256;

// Fields accepted and ignored because they never change the output.
extern const std::set<std::string> kIgnoredFields;

// Applies server-wide defaults (--generate-config: max_new_tokens, temperature, top_p, top_k,
// min_p, stop, stream, ignore_eos, seed, and the other sampling field names) to the fields the
// request omits. A field present in the request wins, also when it is null.
// Returns the names that came from the defaults.
std::set<std::string> apply_generate_defaults(nlohmann::ordered_json& body, const nlohmann::json& defaults,
                                              bool chat);
// Throws Error naming the key when --generate-config has an unknown key or a wrongly typed value.
void validate_generate_config(const nlohmann::json& defaults);

// Parse and validate a body (already JSON). `defaulted` is apply_generate_defaults's result.
CompletionRequest parse_completion_request(const nlohmann::ordered_json& body,
                                           const std::set<std::string>& defaulted = {});
ChatRequest parse_chat_request(const nlohmann::ordered_json& body, const std::set<std::string>& defaulted = {});

// POST /tokenize (vLLM's shapes): a prompt, or the chat form (messages, tools,
// add_generation_prompt, chat_template_kwargs).
struct TokenizeRequest {
  std::optional<std::string> model;
  bool chat = false;
  std::string prompt;
  nlohmann::ordered_json messages;
  nlohmann::ordered_json tools;  // null when absent
  nlohmann::ordered_json chat_template_kwargs = nlohmann::ordered_json::object();
  bool add_generation_prompt = true;
  bool add_special_tokens = true;  // default true for a prompt, false for messages (as vLLM)
  bool return_token_strs = false;
};
TokenizeRequest parse_tokenize_request(const nlohmann::ordered_json& body);
// POST /detokenize: {"model"?, "tokens": [ids]} -> the ids.
std::vector<int32_t> parse_detokenize_request(const nlohmann::ordered_json& body, std::optional<std::string>& model);

// Validates chat messages and normalises them for the template (see ChatRequest::messages).
nlohmann::ordered_json normalize_messages(const nlohmann::ordered_json& messages);

// Parses text as a JSON object body; 400 with the parser's message (position) otherwise.
nlohmann::ordered_json parse_json_body(const std::string& text);

// Maps an Error from SamplingParams::validate / the engine ("sampling parameter 'x' ...") to a
// 400 naming the field.
ApiError api_error_from_engine(const std::string& message);

}  // namespace pypto
