// Qwen3 tool-call parsing, whole and streamed: every output is also fed split at every byte
// boundary (and one byte at a time) and must give the same content and calls as in one piece;
// the expected results are written out by hand.
#include <gtest/gtest.h>

#include "serve/reasoning_parser.h"
#include "serve/tool_parser.h"

namespace pypto {
namespace {

struct Parsed {
  std::string reasoning, content;
  std::vector<ToolCallParser::Call> calls;
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

// The chat handler's chain: reasoning split, then tool calls in the content.
Parsed run(const std::vector<std::string>& pieces, ReasoningStart start = ReasoningStart::Detect, int max_calls = -1) {
  int next = 0;
  ReasoningParser rp(start);
  ToolCallParser tp([&next] { return "call_" + std::to_string(next++); }, max_calls);
  Parsed out;
  auto take = [&](const ReasoningParser::Delta& d, bool last) {
    out.reasoning += d.reasoning;
    ToolCallParser::Delta t = tp.append(d.content);
    out.content += t.content;
    out.calls.insert(out.calls.end(), t.calls.begin(), t.calls.end());
    if (last) {
      ToolCallParser::Delta f = tp.flush();
      out.content += f.content;
      out.calls.insert(out.calls.end(), f.calls.begin(), f.calls.end());
    }
  };
  for (const std::string& p : pieces) take(rp.append(p), false);
  take(rp.flush(), true);
  return out;
}

// Whole, every two-way split, and byte by byte must agree; returns the whole result.
Parsed check_splits(const std::string& text, ReasoningStart start = ReasoningStart::Detect, int max_calls = -1) {
  const Parsed whole = run({text}, start, max_calls);
  for (size_t k = 0; k <= text.size(); ++k)
    EXPECT_EQ(run({text.substr(0, k), text.substr(k)}, start, max_calls), whole) << "split at " << k << " of: " << text;
  std::vector<std::string> bytes;
  for (char c : text) bytes.push_back(std::string(1, c));
  EXPECT_EQ(run(bytes, start, max_calls), whole) << "byte by byte: " << text;
  return whole;
}

const std::string kWeather =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>";
const std::string kTime = "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"tz\": \"CET\"}}\n</tool_call>";

TEST(ToolCallParser, PlainTextHasNoCalls) {
  const Parsed p = check_splits("Hello <tool but not a call> and <tool_cal");
  EXPECT_EQ(p.content, "Hello <tool but not a call> and <tool_cal");
  EXPECT_TRUE(p.calls.empty());
}

TEST(ToolCallParser, OneCall) {
  const Parsed p = check_splits(kWeather);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].index, 0);
  EXPECT_EQ(p.calls[0].id, "call_0");
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[0].arguments, R"({"city":"Paris","days":3})");
}

TEST(ToolCallParser, TextBeforeBetweenAndAfterCalls) {
  const Parsed p = check_splits("Let me check.\n" + kWeather + "\nand\n" + kTime + "\nDone.");
  EXPECT_EQ(p.content, "Let me check.\nand\nDone.");
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].name, "get_weather");
  EXPECT_EQ(p.calls[1].name, "get_time");
  EXPECT_EQ(p.calls[1].index, 1);
  EXPECT_EQ(p.calls[1].id, "call_1");
  EXPECT_EQ(p.calls[1].arguments, R"({"tz":"CET"})");
}

TEST(ToolCallParser, SeveralCallsSeparatedByNewlines) {
  const Parsed p = check_splits(kWeather + "\n" + kTime + "\n" + kWeather);
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 3u);
  EXPECT_EQ(p.calls[2].index, 2);
}

TEST(ToolCallParser, ThinkingThenCalls) {
  const Parsed p = check_splits("<think>\nThe user wants weather.\n</think>\n\n" + kWeather + "\n" + kTime);
  EXPECT_EQ(p.reasoning, "The user wants weather.\n");  // the reasoning parser drops the newline after <think>
  EXPECT_EQ(p.content, "");
  ASSERT_EQ(p.calls.size(), 2u);
  const Parsed inside = check_splits("planning</think>\n\n" + kTime, ReasoningStart::InReasoning);
  EXPECT_EQ(inside.reasoning, "planning");
  ASSERT_EQ(inside.calls.size(), 1u);
}

TEST(ToolCallParser, MalformedCallIsContent) {
  const std::string bad = "<tool_call>\n{\"name\": \"f\", \"arguments\": {oops}}\n</tool_call>";
  Parsed p = check_splits("A " + bad + " B");
  EXPECT_EQ(p.content, "A " + bad + " B");
  EXPECT_TRUE(p.calls.empty());
  // Valid JSON of the wrong shape: arguments must be an object, name a string.
  const std::string shape = "<tool_call>\n{\"name\": 3, \"arguments\": {}}\n</tool_call>";
  EXPECT_EQ(check_splits(shape).content, shape);
  const std::string args = "<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>";
  EXPECT_EQ(check_splits(args).content, args);
  // A malformed call between good ones does not disturb them.
  p = check_splits(kWeather + "\n" + bad + "\n" + kTime);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].index, 1);
  EXPECT_EQ(p.content, bad);
}

TEST(ToolCallParser, UnterminatedLastCall) {
  Parsed p = check_splits("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{}");
  p = check_splits("<tool_call>\n{\"name\": \"f\", \"argu");
  EXPECT_TRUE(p.calls.empty());
  EXPECT_EQ(p.content, "<tool_call>\n{\"name\": \"f\", \"argu");
}

TEST(ToolCallParser, ParallelFalseKeepsOneCall) {
  const Parsed p = check_splits(kWeather + "\n" + kTime, ReasoningStart::Detect, 1);
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.content, kTime);
}

TEST(ToolCallParser, ArgumentsKeepUnicodeAndKeyOrder) {
  const Parsed p = check_splits(
      "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"z\": \"h\xC3\xA9llo \xF0\x9F\x98\x80\", \"a\": [1, {\"b\": null}]}}\n</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{\"z\":\"h\xC3\xA9llo \xF0\x9F\x98\x80\",\"a\":[1,{\"b\":null}]}");
}

}  // namespace
}  // namespace pypto
