#include "chat_template/conversations.h"

#include <cstdint>
#include <string>

namespace pypto::test {
namespace {

using J = nlohmann::ordered_json;

// Small deterministic generator (64-bit LCG), so the case list never changes between runs.
struct Rng {
  uint64_t s;
  uint32_t next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<uint32_t>(s >> 33);
  }
  size_t below(size_t n) { return next() % n; }
  bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }
  template <class T>
  const T& pick(const std::vector<T>& v) { return v[below(v.size())]; }
};

const std::vector<std::string> kSystem = {
    "You are a helpful assistant.",
    "Réponds en français. Use \"double\" and 'single' quotes, a backslash \\ and a tab\t.",
    "  系统提示：请简洁回答。  ",
    "",
    "Line one\nLine two\r\nLine three",
};

const std::vector<std::string> kUser = {
    "Hello!",
    "What's the weather in 北京 today? 🌤️",
    "He said \"hi\" and left; a backslash \\ and \\n stay literal.",
    "  leading and trailing spaces  ",
    "\u3000全角スペース\u00a0nbsp\u3000",
    "line1\nline2\r\nline3\ttab\u000b\u000c",
    "emoji 👨‍👩‍👧‍👦 👍🏽, Ελληνικά, русский, العربية, हिन्दी, ไทย, 한국어",
    "<tool_response>\nI only look like a tool response\n</tool_response>",
    "",
    "{{ not a template }} {% if %} {# nope #}",
    "control \u0001\u001f chars and \u2028 separators \u2029",
    "Ünïcödé NFC é vs NFD e\u0301",
    "</think> inside a user message <think>",
};

const std::vector<std::string> kAssistant = {
    "Sure, here you go.",
    "<think>\nThe user wants a greeting.\n</think>\n\nHello there!",
    "<think>short</think>answer without newlines",
    "prefix text</think>\n\n  answer after spaces",
    "",
    "\n\nleading newlines and trailing ones\n\n",
    "Quotes \"x\" and 'y', backslash \\ and unicode ✓ 你好",
    "<think>\n\n</think>\n\nEmpty thoughts.",
    "  \u3000 spaced answer \u00a0 ",
};

const std::vector<std::string> kReasoning = {
    "Let me think about 'quotes' and \"doubles\".\n",
    "\nMulti-line\nreasoning 推理\n",
    "",
};

const std::vector<std::string> kToolResult = {
    "{\"temp\": 20, \"desc\": \"sunny ☀\"}",
    "plain text result",
    "",
    "<b>html</b> & \"quotes\" \\ backslash\nsecond line",
    "[1, 2, 3]",
};

J tool_weather() {
  return J::parse(R"({"type": "function", "function": {"name": "get_weather",
    "description": "Get the current weather.\n",
    "parameters": {"type": "object", "properties": {
      "location": {"type": "string", "description": " City name, e.g. Paris "},
      "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
    "required": ["location"]}}})");
}
J tool_search() {
  return J::parse(R"({"type": "function", "function": {"name": "search",
    "description": "Search 网页 for \"things\" \\ ok",
    "parameters": {"type": "object", "properties": {
      "query": {"type": "string", "description": "what to look for"},
      "limit": {"type": "integer", "default": 10, "minimum": 1},
      "weights": {"type": "array", "items": {"type": "number"}},
      "ratio": {"type": "number", "default": 0.5, "maximum": 1.0}},
    "required": ["query"]}}})");
}
J tool_bare() {  // no "function" wrapper
  return J::parse(R"({"name": "calc", "description": "Evaluate an expression",
    "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}}})");
}
J tool_odd_keys() {  // integer-like keys are reordered by JS objects; a type list; extra keys
  return J::parse(R"({"type": "function", "function": {"name": "odd_keys",
    "parameters": {"type": "object", "properties": {
      "zeta": {"type": "string"}, "10": {"type": "boolean"}, "2": {"type": ["string", "null"]},
      "émoji🙂": {"type": "string", "description": "unicode key"}},
    "additionalProperties": false}, "strict": true}})");
}
J tool_numbers() {  // number formatting: exponents, big integers, -0, integral floats
  return J::parse(R"({"type": "function", "function": {"name": "numbers", "description": "n",
    "parameters": {"type": "object", "properties": {
      "big": {"type": "integer", "maximum": 1e21, "minimum": -12345678901234567890},
      "tiny": {"type": "number", "multipleOf": 1.5e-7, "default": 3.0},
      "neg": {"type": "number", "default": -0.0, "examples": [1e-7, 123456789.125, 0.1]}}}}})");
}
J tool_null_default() {  // `| string` on null raises in the oracle (Qwen3-Coder)
  return J::parse(R"({"type": "function", "function": {"name": "nullable",
    "parameters": {"type": "object", "properties": {"x": {"type": "string", "default": null}}}}})");
}
J tool_no_params() {
  return J::parse(R"({"type": "function", "function": {"name": "ping", "description": "   "}})");
}

J call_weather() {
  return J::parse(R"({"id": "call_1", "type": "function", "function": {"name": "get_weather",
    "arguments": {"location": "Paris", "unit": "celsius"}}})");
}
J call_string_args() {
  return J::parse(R"({"id": "call_2", "type": "function", "function": {"name": "search",
    "arguments": "{\"query\": \"café \\\"quoted\\\"\", \"limit\": 3}"}})");
}
J call_bare() { return J::parse(R"({"name": "calc", "arguments": {"expr": "1 + 1 \\ 2"}})"); }
J call_nested() {
  return J::parse(R"({"type": "function", "function": {"name": "search", "arguments":
    {"weights": [0.1, 2, 3.5], "opts": {"deep": {"x": null, "y": true}}, "text": "multi\nline \"q\"",
     "n": 42, "f": 2.5, "flag": false, "empty": {}, "list": []}}})");
}
J call_unicode() {
  return J::parse(R"({"type": "function", "function": {"name": "get_weather",
    "arguments": {"location": "東京 🗼", "unit": "fahrenheit"}}})");
}

J text_parts(const std::string& a, const std::string& b) {
  J parts = J::array();
  parts.push_back(J{{"type", "text"}, {"text", a}});
  if (!b.empty()) parts.push_back(J{{"type", "text"}, {"text", b}});
  return parts;
}

J msg(const std::string& role, J content) { return J{{"role", role}, {"content", std::move(content)}}; }

// One assistant step: plain, with reasoning, or calling tools followed by their responses.
void add_assistant_turn(Rng& rng, J& messages) {
  const size_t kind = rng.below(6);
  if (kind <= 1) {
    messages.push_back(msg("assistant", rng.pick(kAssistant)));
  } else if (kind == 2) {
    J m = msg("assistant", rng.pick(kAssistant));
    m["reasoning_content"] = rng.pick(kReasoning);
    messages.push_back(m);
  } else {
    static const std::vector<J (*)()> kCalls = {call_weather, call_string_args, call_bare, call_nested,
                                                 call_unicode};
    J m = msg("assistant", rng.chance(50) ? std::string() : rng.pick(kAssistant));
    if (rng.chance(25)) m["reasoning_content"] = rng.pick(kReasoning);
    J calls = J::array();
    const size_t n = 1 + rng.below(3);
    for (size_t i = 0; i < n; ++i) calls.push_back(rng.pick(kCalls)());
    m["tool_calls"] = calls;
    messages.push_back(m);
    for (size_t i = 0; i < n; ++i) {  // consecutive tool messages
      J t = msg("tool", rng.pick(kToolResult));
      if (rng.chance(50)) t["tool_call_id"] = "call_" + std::to_string(i + 1);
      messages.push_back(t);
    }
    if (rng.chance(60)) messages.push_back(msg("assistant", rng.pick(kAssistant)));
  }
}

J random_conversation(Rng& rng) {
  J messages = J::array();
  if (rng.chance(50)) messages.push_back(msg("system", rng.pick(kSystem)));
  const size_t turns = 1 + rng.below(4);
  for (size_t t = 0; t < turns; ++t) {
    if (rng.chance(8)) {
      messages.push_back(msg("user", text_parts(rng.pick(kUser), rng.pick(kUser))));
    } else {
      messages.push_back(msg("user", rng.pick(kUser)));
    }
    if (t + 1 < turns || rng.chance(40)) add_assistant_turn(rng, messages);
  }
  return messages;
}

J random_tools(Rng& rng) {
  static const std::vector<J (*)()> kTools = {tool_weather, tool_search, tool_bare, tool_odd_keys, tool_numbers,
                                              tool_no_params};
  J tools = J::array();
  const size_t n = 1 + rng.below(3);
  for (size_t i = 0; i < n; ++i) tools.push_back(rng.pick(kTools)());
  if (rng.chance(5)) tools.push_back(tool_null_default());
  return tools;
}

// Conversations written by hand for specific template branches and error paths.
std::vector<J> handmade_conversations() {
  std::vector<J> out;
  auto parse = [](const char* s) { return J::parse(s); };
  // Empty conversation (templates index messages[0]).
  out.push_back(J{{"messages", J::array()}});
  // System not first: rendered as a regular turn by most templates.
  out.push_back(parse(R"({"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "late system"},
    {"role": "user", "content": "b"}]})"));
  // Assistant with content null and tool calls (OpenAI style); raises in some templates.
  out.push_back(parse(R"({"messages": [{"role": "user", "content": "weather?"},
    {"role": "assistant", "content": null, "tool_calls": [{"type": "function", "function": {"name": "get_weather",
     "arguments": {"location": "Oslo"}}}]}, {"role": "tool", "content": "cold"}]})"));
  // Text parts everywhere.
  out.push_back(parse(R"({"messages": [{"role": "system", "content": [{"type": "text", "text": "sys"}]},
    {"role": "user", "content": [{"type": "text", "text": "part one"}, {"type": "text", "text": " part two"}]},
    {"role": "assistant", "content": [{"type": "text", "text": "reply"}]}]})"));
  // Multi-step tool use ending in a tool message (Qwen3's last_query_index logic).
  out.push_back(parse(R"({"messages": [{"role": "user", "content": "plan a trip"},
    {"role": "assistant", "content": "<think>need weather</think>checking", "tool_calls": [{"type": "function",
     "function": {"name": "get_weather", "arguments": "{\"location\": \"Rome\"}"}}]},
    {"role": "tool", "content": "sunny"}, {"role": "tool", "content": "warm"},
    {"role": "assistant", "content": "", "reasoning_content": "still thinking",
     "tool_calls": [{"function": {"name": "search", "arguments": {"query": "hotels"}}}]},
    {"role": "tool", "content": "<tool_response>x</tool_response>"}]})"));
  // User message that is a tool response in disguise, then a real query.
  out.push_back(parse(R"({"messages": [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"},
    {"role": "user", "content": "<tool_response>\nr\n</tool_response>"}, {"role": "assistant",
     "content": "<think>\nhidden\n</think>\n\nvisible"}]})"));
  // Unknown role, reasoning_content null, tool call without arguments.
  out.push_back(parse(R"({"messages": [{"role": "user", "content": "hi"},
    {"role": "function", "content": "legacy"}, {"role": "assistant", "content": "ok", "reasoning_content": null},
    {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "ping"}}]}]})"));
  // Extra variables templates may read.
  out.push_back(parse(R"({"messages": [{"role": "user", "content": "hi"}], "bos_token": "<s>",
    "eos_token": "</s>", "custom_flag": true, "tools": []})"));
  // Tools given as null and a tool with a null default (raises in Qwen3-Coder).
  out.push_back(parse(R"({"messages": [{"role": "user", "content": "hi"}], "tools": null})"));
  J nd = parse(R"({"messages": [{"role": "user", "content": "hi"}]})");
  nd["tools"] = J::array({tool_null_default()});
  out.push_back(nd);
  // Malformed shapes a client may send: missing content or role, non-string content, tools as an
  // object, tool_calls as an object, arguments as a list or a number. The oracle renders some and
  // raises on others; so must we.
  out.push_back(parse(R"({"messages": [{"role": "user"}, {"role": "assistant", "content": 42}]})"));
  out.push_back(parse(R"({"messages": [{"content": "no role"}, {"role": "user", "content": true}]})"));
  out.push_back(parse(R"({"messages": [{"role": "user", "content": "hi"}], "tools": {"name": "not_a_list"}})"));
  out.push_back(parse(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x",
    "tool_calls": {"function": {"name": "f", "arguments": {}}}}]})"));
  out.push_back(parse(R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "",
    "tool_calls": [{"function": {"name": "f", "arguments": [1, "two", null]}},
                   {"function": {"name": "g", "arguments": 3.5}}]}]})"));
  out.push_back(parse(R"({"messages": [{"role": "system", "content": null}, {"role": "user", "content": "hi"}]})"));
  // A very long message.
  out.push_back(J{{"messages", J::array({msg("user", std::string(20000, 'x') + " end")})}});
  return out;
}

}  // namespace

std::vector<nlohmann::ordered_json> chat_template_contexts() {
  std::vector<J> conversations = handmade_conversations();
  Rng rng{20260401};
  for (int i = 0; i < 80; ++i) {
    J c;
    c["messages"] = random_conversation(rng);
    if (rng.chance(45)) c["tools"] = random_tools(rng);
    conversations.push_back(c);
  }
  // Every conversation with every flag combination the templates branch on.
  std::vector<J> contexts;
  for (const J& conv : conversations) {
    for (int agp = 0; agp < 3; ++agp) {
      for (int think = 0; think < 3; ++think) {
        J c = conv;
        if (agp < 2) c["add_generation_prompt"] = agp == 1;
        if (think < 2) c["enable_thinking"] = think == 1;
        contexts.push_back(c);
      }
    }
    // Qwen3.6's preserve_thinking keeps every turn's reasoning (off and absent are covered above).
    for (int think = 0; think < 2; ++think) {
      J c = conv;
      c["add_generation_prompt"] = true;
      c["enable_thinking"] = think == 1;
      c["preserve_thinking"] = true;
      contexts.push_back(c);
    }
  }
  return contexts;
}

}  // namespace pypto::test
