// The limits on request bodies and fields (docs/api.md, "Input limits"): just over each one is a
// 400 naming the field, the limit and the value found; just under it is accepted.
#include <gtest/gtest.h>

#include "serve/json_limits.h"
#include "serve/openai_protocol.h"
#include "serve/request_common.h"
#include "serve/request_limits.h"

namespace pypto {
namespace {

using ojson = nlohmann::ordered_json;

std::string nested_arrays(int depth) { return std::string(size_t(depth), '[') + std::string(size_t(depth), ']'); }

// The ApiError of f(), or a 0-status one when f() accepted the input.
template <class F>
ApiError error_of(F&& f) {
  try {
    f();
  } catch (const ApiError& e) {
    return e;
  }
  return ApiError(0, "accepted", "");
}

ApiError chat_error(const ojson& extra) {
  ojson body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  for (auto it = extra.begin(); it != extra.end(); ++it) body[it.key()] = *it;
  return error_of([&] { parse_chat_request(parse_json_body(body.dump())); });
}

TEST(RequestLimits, BodyNestingIsCheckedBeforeParsing) {
  const std::string ok = "{\"prompt\": \"x\", \"stop\": " + nested_arrays(kMaxJsonDepth - 1) + "}";
  EXPECT_EQ(json_shape(ok).depth, kMaxJsonDepth);
  EXPECT_EQ(error_of([&] { parse_json_body(ok); }).status, 0);
  const ApiError e = error_of([&] { parse_json_body("{\"a\": " + nested_arrays(kMaxJsonDepth) + "}"); });
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(std::string(e.what()), "request body: nesting depth 257 exceeds the limit of 256 (kMaxJsonDepth)");
  EXPECT_EQ(e.code, "json_too_deep");
  // 100,000 levels: refused by the scan (the parser, and every recursive walk after it, never
  // see it).
  EXPECT_EQ(std::string(error_of([&] { parse_json_body(nested_arrays(100000)); }).what()),
            "request body: nesting depth 100000 exceeds the limit of 256 (kMaxJsonDepth)");
  // Brackets inside strings (escaped quotes too) do not count.
  EXPECT_EQ(json_shape("{\"s\": \"[[[[\\\"[[[\"}").depth, 1);
}

TEST(RequestLimits, BodyValueCount) {
  // An array of kMaxJsonValues - 1 elements: kMaxJsonValues values with the array itself.
  std::string ok = "[0";
  for (int64_t i = 2; i < kMaxJsonValues; ++i) ok += ",0";
  ok += "]";
  EXPECT_EQ(json_shape(ok).values, kMaxJsonValues);
  EXPECT_EQ(error_of([&] { check_json_limits(ok, "request body"); }).status, 0);
  const ApiError e = error_of([&] { check_json_limits(ok.substr(0, ok.size() - 1) + ",0]", "request body"); });
  EXPECT_EQ(std::string(e.what()), "request body: about 2000001 values exceed the limit of 2000000 (kMaxJsonValues)");
}

TEST(RequestLimits, NumberTooLargeForADoubleIs400) {
  // Found by openai_request_fuzz: nlohmann reports 1E5555 as out_of_range, not parse_error, and
  // it escaped parse_json_body (a 500).
  const ApiError e = error_of([&] { parse_json_body(R"({"temperature": 555555555E5555555})"); });
  EXPECT_EQ(e.status, 400);
  EXPECT_NE(std::string(e.what()).find("the request body is not valid JSON: [json.exception.out_of_range.406] number "
                                       "overflow parsing '555555555E5555555'"),
            std::string::npos)
      << e.what();
}

TEST(RequestLimits, StopStrings) {
  EXPECT_EQ(chat_error({{"stop", std::vector<std::string>(size_t(kMaxStopStrings), "x")}}).status, 0);
  EXPECT_EQ(std::string(chat_error({{"stop", std::vector<std::string>(size_t(kMaxStopStrings) + 1, "x")}}).what()),
            "'stop' has 65 strings, more than the limit of 64 (kMaxStopStrings)");
  EXPECT_EQ(chat_error({{"stop", std::string(size_t(kMaxStopStringBytes), 'x')}}).status, 0);
  const ApiError e = chat_error({{"stop", {"a", std::string(size_t(kMaxStopStringBytes) + 1, 'x')}}});
  EXPECT_EQ(std::string(e.what()), "'stop' entry 1 is 1025 bytes long, more than the limit of 1024 (kMaxStopStringBytes)");
  EXPECT_EQ(e.param, "stop");
}

TEST(RequestLimits, LogitBiasEntries) {
  auto bias = [](int n) {
    ojson b = ojson::object();
    for (int i = 0; i < n; ++i) b[std::to_string(i)] = 1;
    return b;
  };
  EXPECT_EQ(chat_error({{"logit_bias", bias(kMaxLogitBiasEntries)}}).status, 0);
  const ApiError e = chat_error({{"logit_bias", bias(kMaxLogitBiasEntries + 1)}});
  EXPECT_EQ(std::string(e.what()), "'logit_bias' has 2049 entries, more than the limit of 2048 (kMaxLogitBiasEntries)");
  EXPECT_EQ(e.param, "logit_bias");
}

TEST(RequestLimits, ToolsAndChoices) {
  auto tools = [](int n) {
    ojson t = ojson::array();
    for (int i = 0; i < n; ++i)
      t.push_back({{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
    return t;
  };
  EXPECT_EQ(chat_error({{"tools", tools(kMaxTools)}}).status, 0);
  EXPECT_EQ(std::string(chat_error({{"tools", tools(kMaxTools + 1)}}).what()),
            "'tools' declares 129 functions, more than the limit of 128 (kMaxTools)");
  const ApiError tok = error_of([&] {
    parse_tokenize_request(parse_json_body(
        ojson{{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tools", tools(kMaxTools + 1)}}.dump()));
  });
  EXPECT_EQ(tok.param, "tools");
  auto choice = [](int n) { return ojson{{"choice", std::vector<std::string>(size_t(n), "a")}}; };
  EXPECT_EQ(chat_error({{"structured_outputs", choice(kMaxChoices)}}).status, 0);
  EXPECT_EQ(std::string(chat_error({{"structured_outputs", choice(kMaxChoices + 1)}}).what()),
            "'structured_outputs.choice' has 4097 entries, more than the limit of 4096 (kMaxChoices)");
}

TEST(RequestLimits, NTimesMaxTokens) {
  GenerationFields g;
  g.n = 128;
  const int32_t per_sequence = int32_t(kMaxRequestTokens / 128);
  std::vector<SequenceSpec> specs;
  add_sequences(specs, g, 0, {1, 2}, per_sequence);
  EXPECT_EQ(specs.size(), 128u);
  // A second prompt of the same request adds to the total.
  const ApiError e = error_of([&] { add_sequences(specs, g, 1, {1, 2}, 1); });
  EXPECT_EQ(std::string(e.what()),
            "n x max_tokens over the request's prompts is 4194432 tokens, more than the limit of 4194304 "
            "(kMaxRequestTokens): lower n or max_tokens");
  EXPECT_EQ(e.param, "max_tokens");
}

}  // namespace
}  // namespace pypto
