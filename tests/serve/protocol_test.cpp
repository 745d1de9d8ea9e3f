// Request parsing and validation: every error names the field (param) with an exact message.
#include <gtest/gtest.h>

#include "core/error.h"
#include "serve/openai_protocol.h"

namespace pypto {
namespace {

using ojson = nlohmann::ordered_json;

ApiError completion_error(const std::string& body) {
  try {
    parse_completion_request(parse_json_body(body));
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "", "");
}

ApiError chat_error(const std::string& body) {
  try {
    parse_chat_request(parse_json_body(body));
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "", "");
}

void expect_error(const ApiError& e, const std::string& message, const std::optional<std::string>& param) {
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.type, "invalid_request_error");
  EXPECT_EQ(std::string(e.what()), message);
  EXPECT_EQ(e.param, param);
}

TEST(Protocol, CompletionFieldsParse) {
  CompletionRequest r = parse_completion_request(parse_json_body(R"({
    "model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 5,
    "min_p": 0.1, "n": 3, "seed": 42, "stop": ["a", "b"], "stop_token_ids": [1, 2], "stream": true,
    "stream_options": {"include_usage": true}, "logprobs": 2, "echo": false, "presence_penalty": 0.5,
    "frequency_penalty": -0.5, "repetition_penalty": 1.1, "logit_bias": {"10": 5, "11": -100},
    "ignore_eos": true, "min_tokens": 2, "user": "u"})"));
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "hi");
  EXPECT_EQ(r.max_tokens, 7);
  EXPECT_FALSE(r.max_tokens_is_default);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.5f);
  EXPECT_EQ(r.params.top_k, 5);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.params.seed, 42u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.params.logprobs, 2);
  ASSERT_EQ(r.params.logit_bias.size(), 2u);
  EXPECT_EQ(r.params.logit_bias[1].token_id, 11);
  EXPECT_FLOAT_EQ(r.params.logit_bias[1].bias, -100.0f);
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_EQ(r.params.min_tokens, 2);
}

TEST(Protocol, PromptForms) {
  auto prompts = [](const std::string& p) {
    return parse_completion_request(parse_json_body(R"({"prompt": )" + p + "}")).prompts;
  };
  EXPECT_EQ(prompts(R"(["a", "b"])").size(), 2u);
  auto ids = prompts("[1, 2, 3]");
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_FALSE(ids[0].is_text);
  EXPECT_EQ(ids[0].token_ids, (std::vector<int32_t>{1, 2, 3}));
  auto lists = prompts("[[1], [2, 3]]");
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[1].token_ids, (std::vector<int32_t>{2, 3}));
}

TEST(Protocol, CompletionErrorsNameTheField) {
  expect_error(completion_error("{"), "the request body is not valid JSON: [json.exception.parse_error.101] parse error at line 1, column 2: syntax error while parsing object key - unexpected end of input; expected string literal", std::nullopt);
  expect_error(completion_error("[1]"), "the request body must be a JSON object, got array", std::nullopt);
  expect_error(completion_error(R"({"max_tokens": 5})"), "'prompt' is required", "prompt");
  expect_error(completion_error(R"({"prompt": ""})"), "'prompt' is empty", "prompt");
  expect_error(completion_error(R"({"prompt": []})"), "'prompt' is an empty array", "prompt");
  expect_error(completion_error(R"({"prompt": ["a", ""]})"), "'prompt[1]' is empty", "prompt");
  expect_error(completion_error(R"({"prompt": 5})"),
               "'prompt' must be a string, an array of strings, an array of token ids or an array of token-id arrays, got integer",
               "prompt");
  expect_error(completion_error(R"({"prompt": [1, -2]})"),
               "'prompt[1]' = -2 is out of range: allowed 0 <= prompt[1] <= 2147483647", "prompt[1]");
  expect_error(completion_error(R"({"prompt": "x", "max_tokens": "5"})"), "'max_tokens' must be an integer, got string",
               "max_tokens");
  expect_error(completion_error(R"({"prompt": "x", "max_tokens": 0})"),
               "'max_tokens' = 0 is out of range: allowed 1 <= max_tokens <= 2147483647", "max_tokens");
  expect_error(completion_error(R"({"prompt": "x", "temperature": true})"),
               "'temperature' must be a number, got boolean", "temperature");
  expect_error(completion_error(R"({"prompt": "x", "temperature": -1})"),
               "sampling parameter 'temperature' = -1 is out of range: allowed >= 0 (0 = greedy)", "temperature");
  expect_error(completion_error(R"({"prompt": "x", "top_p": 0})"),
               "sampling parameter 'top_p' = 0 is out of range: allowed 0 < top_p <= 1", "top_p");
  expect_error(completion_error(R"({"prompt": "x", "n": 0})"), "'n' = 0 is out of range: allowed 1 <= n <= 128", "n");
  expect_error(completion_error(R"({"prompt": "x", "logprobs": 21})"),
               "'logprobs' = 21 is out of range: allowed 0 <= logprobs <= 20", "logprobs");
  expect_error(completion_error(R"({"prompt": "x", "stop": [""]})"),
               "'stop' entry 0 is empty: stop strings must be non-empty", "stop");
  expect_error(completion_error(R"({"prompt": "x", "stop": 3})"), "'stop' must be a string or an array of strings, got integer",
               "stop");
  expect_error(completion_error(R"({"prompt": "x", "logit_bias": {"abc": 1}})"), "'logit_bias' key 'abc' is not a token id",
               "logit_bias");
  expect_error(completion_error(R"({"prompt": "x", "logit_bias": {"5": 200}})"),
               "sampling parameter 'logit_bias' for token 5 = 200 is out of range: allowed -100 <= bias <= 100",
               "logit_bias");
  expect_error(completion_error(R"({"prompt": "x", "stream_options": {"include_usage": true}})"),
               "'stream_options' is only allowed when 'stream' is true", "stream_options");
  expect_error(completion_error(R"({"prompt": "x", "min_tokens": 9, "max_tokens": 3})"),
               "'min_tokens' = 9 exceeds 'max_tokens' = 3", "min_tokens");
  expect_error(completion_error(R"({"prompt": "x", "echo": true, "logprobs": 1})"),
               "'echo' together with 'logprobs' needs prompt logprobs, which are not supported", "echo");
}

TEST(Protocol, UnsupportedAndUnknownFields) {
  expect_error(completion_error(R"({"prompt": "x", "suffix": "y"})"),
               "unsupported field 'suffix': insertion (suffix) is not supported", "suffix");
  expect_error(completion_error(R"({"prompt": "x", "best_of": 2})"),
               "unsupported field 'best_of': best_of is not supported (it was removed from vLLM too); use n", "best_of");
  expect_error(completion_error(R"({"prompt": "x", "frobnicate": 1, "zap": 2})"),
               "unknown fields 'frobnicate', 'zap': not supported by this server (it could change the output)",
               "frobnicate");
  expect_error(completion_error(R"({"prompt": "x", "guided_json": {"type": "object"}})"),
               "unsupported field 'guided_json': guided_* fields were removed from vLLM; use structured_outputs.json or "
               "response_format",
               "guided_json");
  // Neutral values and ignored fields pass.
  EXPECT_NO_THROW(parse_completion_request(parse_json_body(
      R"({"prompt": "x", "best_of": 1, "suffix": null, "user": "me", "metadata": {"a": 1}, "logprobs": null})")));
  EXPECT_NO_THROW(parse_chat_request(parse_json_body(
      R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "text"}, "parallel_tool_calls": true})")));
}

TEST(Protocol, ChatMessagesNormalised) {
  ChatRequest r = parse_chat_request(parse_json_body(R"({
    "messages": [{"role": "developer", "content": "sys"},
                 {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
                 {"role": "assistant", "content": null, "tool_calls": []}],
    "max_completion_tokens": 9, "max_tokens": 3, "logprobs": true, "top_logprobs": 2,
    "chat_template_kwargs": {"enable_thinking": false}, "tools": [{"type": "function", "function": {"name": "f"}}]})"));
  EXPECT_EQ(r.messages[0]["role"], "system");
  EXPECT_EQ(r.messages[1]["content"], "a\nb");
  EXPECT_EQ(r.messages[2]["content"], "");
  EXPECT_EQ(r.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.params.logprobs, 2);
  EXPECT_EQ(r.chat_template_kwargs["enable_thinking"], false);
  EXPECT_EQ(r.tools.size(), 1u);
}

TEST(Protocol, ChatErrors) {
  expect_error(chat_error(R"({"model": "m"})"), "'messages' is required", "messages");
  expect_error(chat_error(R"({"messages": []})"), "'messages' is empty: at least one message is required", "messages");
  expect_error(chat_error(R"({"messages": [{"content": "x"}]})"), "'messages[0].role' is required and must be a string",
               "messages[0].role");
  expect_error(chat_error(R"({"messages": [{"role": "robot", "content": "x"}]})"),
               "'messages[0].role' = 'robot' is not one of system, developer, user, assistant, tool", "messages[0].role");
  expect_error(chat_error(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"),
               "'messages[0].content[0].type' = 'image_url' is not supported: image and video inputs need a vision "
               "model, and only text is served (the vision tower of Qwen3.5 / Qwen3.6 checkpoints is not loaded)",
               "messages[0].content[0]");
  expect_error(chat_error(R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "x"},
                                           {"type": "video_url", "video_url": {"url": "v.mp4"}}]}]})"),
               "'messages[0].content[1].type' = 'video_url' is not supported: image and video inputs need a vision "
               "model, and only text is served (the vision tower of Qwen3.5 / Qwen3.6 checkpoints is not loaded)",
               "messages[0].content[1]");
  // priority and cache_salt would change who runs first or what is shared: only their neutral
  // values pass.
  EXPECT_NO_THROW(parse_chat_request(parse_json_body(R"({"messages": [{"role": "user", "content": "x"}], "priority": 0})")));
  expect_error(chat_error(R"({"messages": [{"role": "user", "content": "x"}], "priority": 2})"),
               "unsupported field 'priority': the scheduler serves requests first come, first served: only priority 0 "
               "is accepted",
               "priority");
  expect_error(chat_error(R"({"messages": [{"role": "user", "content": "x"}], "cache_salt": "s"})"),
               "unsupported field 'cache_salt': the prefix cache is shared by all requests; start the server with "
               "--no-enable-prefix-caching to keep requests' prompts apart",
               "cache_salt");
  expect_error(chat_error(R"({"messages": [{"role": "user", "content": [{"type": "input_audio"}]}]})"),
               "'messages[0].content[0].type' = 'input_audio' is not supported: only text parts", "messages[0].content[0]");
  expect_error(chat_error(R"({"messages": [{"role": "user", "content": 5}]})"),
               "'messages[0].content' must be a string or an array of content parts, got integer", "messages[0].content");
  expect_error(chat_error(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})"),
               "'top_logprobs' needs 'logprobs' set to true", "top_logprobs");
  expect_error(chat_error(R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})"),
               "'tool_choice' = \"required\" needs 'tools': no function is declared", "tool_choice");
  expect_error(chat_error(R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": {"enable_thinking": "no"}})"),
               "'chat_template_kwargs.enable_thinking' must be a boolean, got string", "chat_template_kwargs.enable_thinking");
  expect_error(chat_error(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})"),
               "unknown field 'echo': not supported by this server (it could change the output)", "echo");
}

constexpr const char* kTools =
    R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
                 {"type": "function", "function": {"name": "get_time"}}])";

ChatRequest chat_with(const std::string& fields) {
  return parse_chat_request(parse_json_body(R"({"messages": [{"role": "user", "content": "x"}], )" + fields + "}"));
}

ApiError chat_with_error(const std::string& fields) {
  try {
    chat_with(fields);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << fields;
  return ApiError(0, "", "");
}

TEST(Protocol, ToolChoice) {
  EXPECT_EQ(chat_with(kTools).tool_choice, "auto");
  EXPECT_EQ(chat_with(std::string(kTools) + R"(, "tool_choice": "required")").tool_choice, "required");
  ChatRequest named = chat_with(std::string(kTools) +
                                R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}}, "parallel_tool_calls": false)");
  EXPECT_EQ(named.tool_choice["function"]["name"], "get_time");
  EXPECT_FALSE(named.parallel_tool_calls);
  ChatRequest none = chat_with(std::string(kTools) + R"(, "tool_choice": "none")");
  EXPECT_TRUE(none.tools.is_null());
  expect_error(chat_with_error(std::string(kTools) + R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})"),
               "'tool_choice' names function 'nope', which is not in 'tools' (declared: get_weather, get_time)",
               "tool_choice");
  expect_error(chat_with_error(R"("tool_choice": {"type": "function", "function": {"name": "f"}})"),
               "'tool_choice' = {\"type\":\"function\",\"function\":{\"name\":\"f\"}} needs 'tools': no function is declared",
               "tool_choice");
  expect_error(chat_with_error(std::string(kTools) + R"(, "tool_choice": "always")"),
               "'tool_choice' = \"always\" is not one of \"none\", \"auto\", \"required\" or {\"type\": \"function\", "
               "\"function\": {\"name\": ...}}",
               "tool_choice");
  expect_error(chat_with_error(R"("tools": [{"type": "function", "function": {"name": "bad name"}}])"),
               "'tools[0].function.name' is required: 1 to 64 of a-z, A-Z, 0-9, _ and -", "tools[0].function.name");
  expect_error(chat_with_error(R"("tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}])"),
               "'tools[0].function.parameters' must be an object (a JSON schema), got integer", "tools[0].function.parameters");
  expect_error(chat_with_error(std::string(kTools) + R"(, "response_format": {"type": "json_object"})"),
               "'tool_choice' = \"auto\" cannot be combined with 'response_format' or 'structured_outputs' (set "
               "tool_choice to \"none\")",
               "tool_choice");
}

TEST(Protocol, ResponseFormatAndStructuredOutputsShapes) {
  EXPECT_TRUE(chat_with(R"("response_format": {"type": "text"})").response_format.is_null());
  EXPECT_EQ(chat_with(R"("response_format": {"type": "json_object"})").response_format["type"], "json_object");
  EXPECT_EQ(chat_with(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "integer"}, "strict": true}})")
                .response_format["json_schema"]["schema"]["type"],
            "integer");
  EXPECT_EQ(chat_with(R"("structured_outputs": {"regex": "[a-z]+"})").structured_outputs["regex"], "[a-z]+");
  expect_error(chat_with_error(R"("response_format": {"type": "yaml"})"),
               "'response_format.type' = \"yaml\" is not one of \"text\", \"json_object\", \"json_schema\"",
               "response_format");
  expect_error(chat_with_error(R"("response_format": {"type": "json_schema", "json_schema": {"schema": {}}})"),
               "'response_format.json_schema.name' is required: 1 to 64 of a-z, A-Z, 0-9, _ and -", "response_format");
  expect_error(chat_with_error(R"("structured_outputs": {"regex": "a", "choice": ["b"]})"),
               "'structured_outputs' must set exactly one of json, regex, choice, grammar, json_object",
               "structured_outputs");
  expect_error(chat_with_error(R"("structured_outputs": {"structural_tag": "x"})"),
               "unsupported field 'structured_outputs.structural_tag' (supported: json, regex, choice, grammar, json_object)",
               "structured_outputs");
  expect_error(chat_with_error(R"("structured_outputs": {"choice": []})"),
               "'structured_outputs.choice' must be a non-empty array of strings, got array", "structured_outputs.choice");
}

TEST(Protocol, GenerateConfigDefaultsLoseToExplicitFields) {
  const nlohmann::json defaults = {{"max_new_tokens", 32}, {"temperature", 0.2}, {"top_k", 5}, {"stop", {"x"}}};
  ojson body = parse_json_body(R"({"prompt": "p", "temperature": 0.9, "top_k": null})");
  const std::set<std::string> applied = apply_generate_defaults(body, defaults, false);
  EXPECT_EQ(applied, (std::set<std::string>{"max_tokens", "stop"}));
  CompletionRequest r = parse_completion_request(body, applied);
  EXPECT_FLOAT_EQ(r.params.temperature, 0.9f);  // explicit wins
  EXPECT_FALSE(r.params.top_k.has_value());     // explicit null disables the server's top_k
  EXPECT_EQ(r.max_tokens, 32);
  EXPECT_TRUE(r.max_tokens_is_default);  // clamped to the room left, never rejected
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"x"});

  ojson chat = parse_json_body(R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 4})");
  ChatRequest c = parse_chat_request(chat, apply_generate_defaults(chat, defaults, true));
  EXPECT_EQ(c.max_tokens, 4);
  EXPECT_FALSE(c.max_tokens_is_default);

  ojson null_budget = parse_json_body(R"({"prompt": "p", "max_tokens": null})");
  CompletionRequest n = parse_completion_request(null_budget, apply_generate_defaults(null_budget, defaults, false));
  EXPECT_FALSE(n.max_tokens.has_value());  // null: all the room the prompt leaves
}

TEST(Protocol, GenerateConfigValidation) {
  EXPECT_NO_THROW(validate_generate_config({{"max_new_tokens", 16}, {"temperature", 0}, {"stream", true}}));
  try {
    validate_generate_config({{"max_new_tokenz", 16}});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--generate-config: unknown key 'max_new_tokenz'");
  }
  try {
    validate_generate_config({{"top_p", 2}});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--generate-config: sampling parameter 'top_p' = 2 is out of range: allowed 0 < top_p <= 1");
  }
}

TEST(Protocol, Tokenize) {
  TokenizeRequest t = parse_tokenize_request(parse_json_body(R"({"prompt": "hi", "return_token_strs": true})"));
  EXPECT_FALSE(t.chat);
  EXPECT_TRUE(t.add_special_tokens);
  TokenizeRequest c = parse_tokenize_request(parse_json_body(
      R"({"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": false,
          "chat_template_kwargs": {"enable_thinking": false}})"));
  EXPECT_TRUE(c.chat);
  EXPECT_FALSE(c.add_special_tokens);
  EXPECT_FALSE(c.add_generation_prompt);
  try {
    parse_tokenize_request(parse_json_body(R"({"prompt": "a", "messages": []})"));
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_STREQ(e.what(), "exactly one of 'prompt' and 'messages' is required");
  }
  std::optional<std::string> model;
  EXPECT_EQ(parse_detokenize_request(parse_json_body(R"({"tokens": [1, 2]})"), model), (std::vector<int32_t>{1, 2}));
}

}  // namespace
}  // namespace pypto
