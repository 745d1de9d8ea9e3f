// The XML tool-call form (Qwen3-Coder, Qwen3.5/3.6), whole and streamed: every output is also
// fed split at every byte boundary and one byte at a time, through the reasoning split first as
// the chat handler does, and must give the same content, reasoning and calls as in one piece.
// Expected results are written out by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>

#include "serve/reasoning_parser.h"
#include "serve/xml_param_value.h"
#include "serve/xml_tool_parser.h"

namespace pypto {
namespace {

using ojson = nlohmann::ordered_json;

const ojson kTools = ojson::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
     "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
     "ratio": {"type": "number"}, "opts": {"type": "object"}, "tags": {"type": "array"},
     "note": {"type": ["string", "null"]}, "unit": {"enum": ["c", "f"]}}}}},
  {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
     "properties": {"tz": {"type": "string"}}}}}
])");

struct Parsed {
  std::string reasoning, content;
  std::vector<ToolCallStream::Call> calls;
  bool operator==(const Parsed& o) const {
    if (reasoning != o.reasoning || content != o.content || calls.size() != o.calls.size()) return false;
    for (size_t i = 0; i < calls.size(); ++i)
      if (calls[i].index != o.calls[i].index || calls[i].id != o.calls[i].id || calls[i].name != o.calls[i].name ||
          calls[i].arguments != o.calls[i].arguments)
        return false;
    return true;
  }
};

std::ostream& operator<<(std::ostream& os, const Parsed& p) {
  os << "reasoning='" << p.reasoning << "' content='" << p.content << "' calls=[";
  for (const auto& c : p.calls) os << "{" << c.index << " " << c.id << " " << c.name << " " << c.arguments << "}";
  return os << "]";
}

// Reasoning split (ending at a tool call, as chat.cpp sets it), then the XML parser; calls are
// rebuilt from the streamed pieces as an OpenAI client does and must equal the parser's list.
Parsed run(const std::vector<std::string>& pieces, ReasoningStart start, int max_calls) {
  int next = 0;
  ReasoningParser rp(start);
  rp.end_reasoning_at_tool_call();
  XmlToolCallParser tp(kTools, [&next] { return "call_" + std::to_string(next++); }, max_calls);
  Parsed out;
  auto take_calls = [&](const std::vector<ToolCallStream::CallDelta>& calls) {
    for (const ToolCallStream::CallDelta& c : calls) {
      if (c.opens) {
        EXPECT_EQ(c.index, int32_t(out.calls.size()));
        EXPECT_TRUE(c.arguments.empty());
        out.calls.push_back({.index = c.index, .id = c.id, .name = c.name, .arguments = {}});
      } else {
        EXPECT_LT(size_t(c.index), out.calls.size());
        if (size_t(c.index) >= out.calls.size()) return;
        EXPECT_FALSE(c.arguments.empty());
        out.calls[size_t(c.index)].arguments += c.arguments;
      }
    }
  };
  auto take = [&](const ReasoningParser::Delta& d, bool last) {
    out.reasoning += d.reasoning;
    ToolCallStream::Delta t = tp.append(d.content);
    out.content += t.content;
    take_calls(t.calls);
    if (last) {
      ToolCallStream::Delta f = tp.flush();
      out.content += f.content;
      take_calls(f.calls);
    }
  };
  for (const std::string& p : pieces) take(rp.append(p), false);
  take(rp.flush(), true);
  Parsed kept = out;
  kept.calls = tp.calls();
  EXPECT_EQ(out, kept) << "streamed pieces vs the parser's calls";
  return out;
}

Parsed check_splits(const std::string& text, ReasoningStart start = ReasoningStart::Detect, int max_calls = -1) {
  const Parsed whole = run({text}, start, max_calls);
  for (size_t k = 0; k <= text.size(); ++k)
    EXPECT_EQ(run({text.substr(0, k), text.substr(k)}, start, max_calls), whole) << "split at " << k << " of: " << text;
  std::vector<std::string> bytes;
  for (char c : text) bytes.push_back(std::string(1, c));
  EXPECT_EQ(run(bytes, start, max_calls), whole) << "byte by byte: " << text;
  return whole;
}

// The arguments must be JSON; compared as values so the expectation reads naturally.
void expect_args(const ToolCallStream::Call& c, const char* json) {
  const ojson got = ojson::parse(c.arguments, nullptr, false);
  ASSERT_FALSE(got.is_discarded()) << "arguments are not JSON: " << c.arguments;
  EXPECT_EQ(got, ojson::parse(json)) << c.arguments;
}

const std::string kWeather =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
    "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
const std::string kTime = "<tool_call>\n<function=get_time>\n<parameter=tz>\nCET\n</parameter>\n</function>\n</tool_call>";

TEST(XmlToolCallParser, PlainTextHasNoCalls) {
  const Parsed p = check_splits("Hello <function=x> and <tool_cal");
  EXPECT_EQ(p.content, "Hello <function=x> and <tool_cal");
  EXPECT_TRUE(p.calls.empty());
}

TEST(XmlToolCallParser, OneCallTypedBySchema) {
  const Parsed p = check_splits(kWeather);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].id, "call_0");
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","days":3})");
}

TEST(XmlToolCallParser, EveryTypeAndUnknownParameter) {
  const Parsed p = check_splits(
      "<tool_call>\n<function=get_weather>\n"
      "<parameter=city>\n42\n</parameter>\n"            // string stays string, even when numeric
      "<parameter=metric>\ntrue\n</parameter>\n"
      "<parameter=ratio>\n0.5\n</parameter>\n"
      "<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n"
      "<parameter=tags>\n[\"x\", \"y\"]\n</parameter>\n"
      "<parameter=note>\nnull\n</parameter>\n"
      "<parameter=unit>\nc\n</parameter>\n"             // no type, not JSON: string
      "<parameter=extra>\n7\n</parameter>\n"            // not in the schema: string
      "<parameter=days>\nthree\n</parameter>\n"         // breaks the schema: kept as written
      "</function>\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_args(p.calls[0], R"({"city": "42", "metric": true, "ratio": 0.5, "opts": {"a": [1, 2]}, "tags": ["x", "y"],
                              "note": null, "unit": "c", "extra": "7", "days": "three"})");
}

TEST(XmlToolCallParser, MultiLineStringValueKeepsInnerNewlines) {
  const Parsed p = check_splits(
      "<tool_call>\n<function=get_time>\n<parameter=tz>\n\nline one\nline two\n\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  expect_args(p.calls[0], R"({"tz": "\nline one\nline two\n"})");
}

// String values stream as they are written: escaped, never an unfinished UTF-8 character, and
// the format's closing newline is held back until it is known to be the format's.
TEST(XmlToolCallParser, StringValuesStreamAsWritten) {
  const Parsed p = check_splits(
      "<tool_call>\n<function=get_weather>\n<parameter=city>\n東京 \"Tokyo\"\\\n\tx\n</parameter>\n"
      "<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"東京 \"Tokyo\"\\\n\tx","days":2})");

  XmlToolCallParser tp(kTools, [] { return std::string("call_0"); });
  auto args = [](const ToolCallStream::Delta& d) {
    std::string s;
    for (const auto& c : d.calls) s += c.arguments;
    return s;
  };
  EXPECT_EQ(args(tp.append("<tool_call>\n<function=get_weather>\n<parameter=city>\nNew ")), R"({"city":"New )");
  EXPECT_EQ(args(tp.append("York\n")), "York");  // the newline may be the format's: held
  EXPECT_EQ(args(tp.append("\xE6\x9D")), R"(\n)");  // it was not (JSON-escaped); the unfinished character is held
  EXPECT_EQ(args(tp.append("\xB1\n</param")), "東");
  EXPECT_EQ(args(tp.append("eter>\n</function>")), R"("})");
  EXPECT_EQ(tp.calls()[0].arguments, R"({"city":"New York\n東"})");
}

TEST(XmlToolCallParser, NoParameters) {
  const Parsed p = check_splits("<tool_call>\n<function=get_time>\n</function>\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{}");
}

TEST(XmlToolCallParser, TextAroundAndBetweenCalls) {
  const Parsed p = check_splits("Let me check.\n\n" + kWeather + "\n" + kTime + "\nDone.");
  // As with the JSON form: whitespace at the ends goes, whitespace between text pieces stays.
  EXPECT_EQ(p.content, "Let me check.\n\n\n\nDone.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].index, 1);
  EXPECT_EQ(p.calls[1].id, "call_1");
  EXPECT_EQ(p.calls[1].arguments, R"({"tz":"CET"})");
}

TEST(XmlToolCallParser, UnknownFunctionIsContent) {
  const std::string text = "<tool_call>\n<function=rm_rf>\n<parameter=path>\n/\n</parameter>\n</function>\n</tool_call>";
  const Parsed p = check_splits(text);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, text);
}

TEST(XmlToolCallParser, JsonBodyIsContent) {
  const std::string text = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  const Parsed p = check_splits(text);
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, text);
}

TEST(XmlToolCallParser, BrokenBodyClosesTheCallAndRestIsContent) {
  const Parsed p = check_splits(
      "<tool_call>\n<function=get_time>\n<parameter=tz>\nCET\n</parameter>\noops\n</function>\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"tz":"CET"})");
  EXPECT_EQ(p.content, "oops\n</function>\n</tool_call>");
}

TEST(XmlToolCallParser, CutShortKeepsWhatItHas) {
  const Parsed p = check_splits("<tool_call>\n<function=get_weather>\n<parameter=city>\nPar");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Par"})");
  const Parsed head = check_splits("<tool_call>\n<function=get_wea");
  EXPECT_TRUE(head.calls.empty());
  EXPECT_EQ(head.content, "<tool_call>\n<function=get_wea");
}

TEST(XmlToolCallParser, MaxCallsLeavesTheRestAsContent) {
  const Parsed p = check_splits(kTime + "\n" + kWeather, ReasoningStart::Detect, 1);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_time");
  EXPECT_EQ(p.content, kWeather);
}

TEST(XmlToolCallParser, CallRightAfterThinkBlock) {
  const Parsed p = check_splits("<think>\nweather needed\n</think>\n\n" + kTime);
  EXPECT_EQ(p.reasoning, "weather needed\n");
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_time");
}

// Qwen3.5's prompt opens the think block; the model may call a tool before closing it, and the
// `</think>` it writes afterwards is not content.
TEST(XmlToolCallParser, CallInsideThinkBlock) {
  const Parsed p = check_splits("I need the time.\n" + kTime + "\n</think>\n\nChecking.", ReasoningStart::InReasoning);
  EXPECT_EQ(p.reasoning, "I need the time.\n");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"tz":"CET"})");
  EXPECT_EQ(p.content, "Checking.");
}

// Malformed output never throws and still splits the same whichever way it is streamed: random
// edits of valid calls (tag fragments, deletions, stray bytes) through check_splits, which
// compares every split with the whole and the streamed calls with the parser's own.
TEST(XmlToolCallParser, RandomlyBrokenCallsAreHandledTheSameAnySplit) {
  const std::vector<std::string> bits = {"<tool_call>", "</tool_call>", "<function=", "get_time>", "</function>",
                                         "<parameter=", "tz>", "</parameter>", "\n", "<", ">", "/", "x", "\xE4\xBD"};
  std::mt19937 rng(5);
  int with_calls = 0, with_content = 0;
  for (int i = 0; i < 150; ++i) {
    std::string text = (i % 2 ? kWeather : kTime) + (i % 3 ? "\n" + kTime : "");
    for (int e = 0; e < 3; ++e) {
      const size_t at = rng() % (text.size() + 1);
      if (rng() % 2) text.insert(at, bits[rng() % bits.size()]);
      else text.erase(at, rng() % 12);
    }
    const Parsed p = check_splits(text);
    with_calls += !p.calls.empty();
    with_content += !p.content.empty();
    for (const auto& c : p.calls) EXPECT_EQ(c.arguments.front(), '{') << text;
  }
  EXPECT_GT(with_calls, 10);    // the edits leave many calls readable...
  EXPECT_GT(with_content, 10);  // ...and turn many into content
}

TEST(XmlParamValue, TypesFromSchema) {
  const nlohmann::json integer = {{"type", "integer"}};
  EXPECT_EQ(xml_param_value("12", integer), ojson(12));
  EXPECT_EQ(xml_param_value("1.5", integer), ojson("1.5"));  // not an integer: as written
  EXPECT_EQ(xml_param_value("false", {{"type", "boolean"}}), ojson(false));
  EXPECT_EQ(xml_param_value("null", {{"type", "string"}}), ojson("null"));
  EXPECT_EQ(xml_param_value("null", {{"type", nlohmann::json::array({"integer", "null"})}}), ojson(nullptr));
  EXPECT_EQ(xml_param_value("[1]", nlohmann::json()), ojson("[1]"));  // undeclared: string
  EXPECT_EQ(xml_param_value("[1]", nlohmann::json::object()), ojson::parse("[1]"));  // declared, no type
}

}  // namespace
}  // namespace pypto
