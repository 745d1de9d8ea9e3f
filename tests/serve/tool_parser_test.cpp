// Qwen3 tool-call parsing, whole and streamed: every output is also fed split at every byte
// boundary (and one byte at a time) and must give the same content and calls as in one piece;
// the expected results are written out by hand.
#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <random>

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

// The chat handler's chain: reasoning split, then tool calls in the content. Calls are rebuilt
// from the streamed pieces the way an OpenAI client accumulates them (the first piece of a call
// opens it with id and name and no arguments; later pieces append arguments) and must equal the
// parser's own list. `fragments` counts the argument pieces.
Parsed run(const std::vector<std::string>& pieces, ReasoningStart start = ReasoningStart::Detect, int max_calls = -1,
           int* fragments = nullptr) {
  int next = 0;
  ReasoningParser rp(start);
  ToolCallParser tp([&next] { return "call_" + std::to_string(next++); }, max_calls);
  Parsed out;
  auto take_calls = [&](const std::vector<ToolCallParser::CallDelta>& calls) {
    for (const ToolCallParser::CallDelta& c : calls) {
      if (c.opens) {
        EXPECT_EQ(c.index, int32_t(out.calls.size()));
        EXPECT_TRUE(c.arguments.empty());
        out.calls.push_back({.index = c.index, .id = c.id, .name = c.name});
      } else {
        ASSERT_LT(size_t(c.index), out.calls.size());
        EXPECT_TRUE(c.id.empty() && c.name.empty());
        EXPECT_FALSE(c.arguments.empty());
        out.calls[size_t(c.index)].arguments += c.arguments;
        if (fragments) ++*fragments;
      }
    }
  };
  auto take = [&](const ReasoningParser::Delta& d, bool last) {
    out.reasoning += d.reasoning;
    ToolCallParser::Delta t = tp.append(d.content);
    out.content += t.content;
    take_calls(t.calls);
    if (last) {
      ToolCallParser::Delta f = tp.flush();
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

TEST(ToolCallParser, MalformedHeaderIsContent) {
  // Before `"arguments": {` is read nothing of a call is reported; a header that does not match
  // leaves the whole text as content, tags included.
  const std::string shape = "<tool_call>\n{\"name\": 3, \"arguments\": {}}\n</tool_call>";
  Parsed p = check_splits("A " + shape + " B");
  EXPECT_EQ(p.content, "A " + shape + " B");
  EXPECT_TRUE(p.calls.empty());
  const std::string args = "<tool_call>{\"name\": \"f\", \"arguments\": \"{}\"}</tool_call>";
  EXPECT_EQ(check_splits(args).content, args);
  const std::string order = "<tool_call>{\"arguments\": {}, \"name\": \"f\"}</tool_call>";
  EXPECT_EQ(check_splits(order).content, order);
  const std::string not_json = "<tool_call>get_weather(city='Paris')</tool_call>";
  EXPECT_EQ(check_splits(not_json).content, not_json);
  // A tag inside a failed header is read again: the second call is a call.
  p = check_splits("<tool_call>\n" + kTime);
  EXPECT_EQ(p.content, "<tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "get_time");
  // A malformed call between good ones does not disturb them.
  p = check_splits(kWeather + "\n" + shape + "\n" + kTime);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[1].index, 1);
  EXPECT_EQ(p.content, shape);
  // A name with escapes is decoded.
  p = check_splits("<tool_call>{\"name\":\"a\\u0062\\\"c\",\"arguments\":{}}</tool_call>");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "ab\"c");
}

TEST(ToolCallParser, JsonBrokenAfterTheHeaderStaysACall) {
  // The call was opened (and streamed) before the bad byte: the rest of its body up to
  // </tool_call> is appended to the arguments as written; the text after it is content again.
  const std::string bad = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1, oops}}\n</tool_call>";
  Parsed p = check_splits("A " + bad + " B");
  EXPECT_EQ(p.content, "A B");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].name, "f");
  EXPECT_EQ(p.calls[0].arguments, "{\"a\":1,oops}}\n");
  // Extra keys after the arguments: the object is complete, the rest is kept as written.
  p = check_splits("<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": [true]}, \"x\": 1}</tool_call>" + kTime);
  ASSERT_EQ(p.calls.size(), 2u);
  EXPECT_EQ(p.calls[0].arguments, "{\"a\":[true]}, \"x\": 1}");
  EXPECT_EQ(p.calls[1].arguments, R"({"tz":"CET"})");
}

TEST(ToolCallParser, ArgumentsStreamAsTheyAreWritten) {
  // Fed byte by byte, the arguments arrive in many pieces, each released before </tool_call>.
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"city\": \"Paris\", \"n\": [1, 2]}}";
  int fragments = 0;
  std::vector<std::string> bytes;
  for (char c : text) bytes.push_back(std::string(1, c));
  bytes.push_back("\n</tool_call>");
  const std::vector<std::string> before_close(bytes.begin(), bytes.end() - 1);
  int open_fragments = 0;
  const Parsed open = run(before_close, ReasoningStart::ContentOnly, -1, &open_fragments);
  ASSERT_EQ(open.calls.size(), 1u);
  EXPECT_EQ(open.calls[0].arguments, R"({"city":"Paris","n":[1,2]})");
  const Parsed p = run(bytes, ReasoningStart::ContentOnly, -1, &fragments);
  EXPECT_EQ(p, open);
  // One piece per byte of the compact arguments ('{' rides with the header's last byte).
  EXPECT_EQ(fragments, int(std::string(R"({"city":"Paris","n":[1,2]})").size()));
  // A number is released as its digits arrive; a string's bytes too, escapes and all.
  ToolCallParser tp([] { return std::string("call_x"); });
  ToolCallParser::Delta d = tp.append("<tool_call>{\"name\": \"g\", \"arguments\": {\"s\": \"a\\n");
  ASSERT_EQ(d.calls.size(), 2u);
  EXPECT_TRUE(d.calls[0].opens);
  EXPECT_EQ(d.calls[1].arguments, "{\"s\":\"a\\n");
  d = tp.append("b\", \"k\": -12");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].arguments, "b\",\"k\":-12");
  d = tp.append("e3 }");
  EXPECT_EQ(d.calls[0].arguments, "e3}");
}

TEST(ToolCallParser, TagsInsideStringsAreText) {
  // The arguments are read as JSON, so </tool_call> or braces inside a string do not end them.
  const Parsed p = check_splits(
      "<tool_call>{\"name\": \"echo\", \"arguments\": {\"t\": \"}} </tool_call> <tool_call>\"}}</tool_call>tail");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, R"({"t":"}} </tool_call> <tool_call>"})");
  EXPECT_EQ(p.content, "tail");
}

TEST(ToolCallParser, RandomArgumentsMatchACompactDump) {
  // Random JSON objects written with random whitespace: the arguments must equal nlohmann's
  // compact dump of the same value (an independent writer), for every split.
  std::mt19937 rng(7);
  std::function<nlohmann::ordered_json(int)> value = [&](int depth) -> nlohmann::ordered_json {
    switch (rng() % (depth > 2 ? 4 : 6)) {
      case 0: return int(rng() % 2000) - 1000;
      case 1: return std::string("s") + char('a' + rng() % 26) + (rng() % 2 ? "\"\\/\n" : " }]");
      case 2: return rng() % 2 == 0;
      case 3: return nullptr;
      case 4: {
        nlohmann::ordered_json a = nlohmann::ordered_json::array();
        for (int i = int(rng() % 3); i > 0; --i) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        nlohmann::ordered_json o = nlohmann::ordered_json::object();
        for (int i = int(rng() % 3); i > 0; --i) o["k" + std::to_string(rng() % 100)] = value(depth + 1);
        return o;
      }
    }
  };
  for (int t = 0; t < 25; ++t) {
    nlohmann::ordered_json args = nlohmann::ordered_json::object();
    for (int i = int(rng() % 4); i > 0; --i) args["p" + std::to_string(i)] = value(0);
    // Re-indent the pretty form's whitespace at random (outside strings only: dump escapes
    // newlines inside strings, so every raw '\n' and its indent are between tokens).
    std::string pretty = args.dump(int(rng() % 3));
    std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": " + pretty + "}\n</tool_call>";
    const Parsed p = check_splits(text);
    ASSERT_EQ(p.calls.size(), 1u) << text;
    EXPECT_EQ(p.calls[0].arguments, args.dump()) << text;
    EXPECT_EQ(nlohmann::ordered_json::parse(p.calls[0].arguments), args);
  }
}

TEST(ToolCallParser, UnterminatedLastCall) {
  Parsed p = check_splits("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{}");
  p = check_splits("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{}");
  EXPECT_EQ(p.content, "");
  // Cut inside the arguments (max_tokens): the call keeps what was written, as OpenAI's does.
  p = check_splits("<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, ");
  ASSERT_EQ(p.calls.size(), 1u);
  EXPECT_EQ(p.calls[0].arguments, "{\"a\":[1,");
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
