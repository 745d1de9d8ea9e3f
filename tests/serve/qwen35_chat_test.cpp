// Qwen3.5/3.6 chat through the serving pieces: the shipped template (model/qwen35_chat_template.h)
// makes the prompt end inside <think> unless thinking is off, so the reasoning split starts in
// reasoning; its tool-call rendering is XML, which picks the XML parser under
// --tool-call-parser auto and which that parser reads back to the arguments it was given.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "core/error.h"
#include "model/qwen35_chat_template.h"
#include "serve/reasoning_parser.h"
#include "serve/tool_format.h"
#include "serve/xml_tool_parser.h"
#include "support/script_engine.h"
#include "tokenizer/chat_template.h"

namespace pypto {
namespace {

using ojson = nlohmann::ordered_json;

const ojson kTools = ojson::parse(R"([{"type": "function", "function": {"name": "get_weather",
  "description": "Weather of a city", "parameters": {"type": "object", "required": ["city"], "properties": {
  "city": {"type": "string"}, "days": {"type": "integer"}, "opts": {"type": "object"}}}}}])");

std::shared_ptr<const ChatTemplate> qwen35() { return ChatTemplate::parse(qwen35_chat_template()); }

ojson context(bool add_generation_prompt, std::optional<bool> thinking) {
  ojson c;
  c["messages"] = ojson::array({{{"role", "user"}, {"content", "Weather in Paris?"}}});
  c["tools"] = kTools;
  c["add_generation_prompt"] = add_generation_prompt;
  if (thinking) c["enable_thinking"] = *thinking;
  return c;
}

TEST(Qwen35Chat, ThinkingOnByDefaultStartsInReasoning) {
  const auto t = qwen35();
  const std::string on = t->render(context(true, std::nullopt));
  EXPECT_TRUE(on.ends_with("<|im_start|>assistant\n<think>\n")) << on;
  EXPECT_EQ(reasoning_start_from_prompt(on), ReasoningStart::InReasoning);
  EXPECT_EQ(reasoning_start_from_prompt(t->render(context(true, true))), ReasoningStart::InReasoning);
  const std::string off = t->render(context(true, false));
  EXPECT_TRUE(off.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << off;
  EXPECT_EQ(reasoning_start_from_prompt(off), ReasoningStart::ContentOnly);

  // A completion that starts inside the block: reasoning, then content after </think>.
  ReasoningParser p(reasoning_start_from_prompt(on));
  ReasoningParser::Delta d = p.append("It is a city.\n</think>\n\nSunny.");
  const ReasoningParser::Delta f = p.flush();
  EXPECT_EQ(d.reasoning + f.reasoning, "It is a city.\n");
  EXPECT_EQ(d.content + f.content, "Sunny.");
}

TEST(Qwen35Chat, ToolsAreOfferedInTheXmlForm) {
  const std::string prompt = qwen35()->render(context(true, std::nullopt));
  EXPECT_NE(prompt.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"get_weather\""), std::string::npos)
      << prompt;
  EXPECT_NE(prompt.find("<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"),
            std::string::npos);
}

// The template writes an assistant's earlier call; the parser reads it back to the same values.
TEST(Qwen35Chat, TemplateCallsReadBackByTheXmlParser) {
  const ojson args = ojson::parse(R"({"city": "Paris", "days": 3, "opts": {"a": [1, "x"]}})");
  ojson c = context(false, std::nullopt);
  c["messages"].push_back({{"role", "assistant"},
                           {"content", ""},
                           {"tool_calls", ojson::array({{{"type", "function"},
                                                         {"function", {{"name", "get_weather"}, {"arguments", args}}}}})}});
  const std::string text = qwen35()->render(c);
  const size_t at = text.rfind("<tool_call>");
  ASSERT_NE(at, std::string::npos) << text;
  const std::string call = text.substr(at, text.rfind("</tool_call>") + 12 - at);
  EXPECT_EQ(call,
            "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
            "</parameter>\n<parameter=opts>\n{\"a\": [1, \"x\"]}\n</parameter>\n</function>\n</tool_call>");
  XmlToolCallParser p(kTools, [] { return std::string("call_0"); });
  p.append(call);
  p.flush();
  ASSERT_EQ(p.calls().size(), 1u);
  EXPECT_EQ(ojson::parse(p.calls()[0].arguments), args);
}

// OpenAI clients send an earlier call's arguments as a JSON string; the XML template needs them
// as an object, the JSON one as they are.
TEST(ToolFormat, MessagesForTemplateParseArgumentsForXmlOnly) {
  const ojson msgs = ojson::parse(R"([{"role": "user", "content": "hi"}, {"role": "assistant", "content": null,
    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "get_weather",
    "arguments": "{\"city\": \"Oslo\", \"days\": 2}"}}]}])");
  EXPECT_EQ(messages_for_template(ToolFormat::Json, msgs), msgs);
  const ojson xml = messages_for_template(ToolFormat::Xml, msgs);
  EXPECT_EQ(xml[1]["tool_calls"][0]["function"]["arguments"], ojson::parse(R"({"city": "Oslo", "days": 2})"));
  ojson c;
  c["messages"] = xml;
  c["tools"] = kTools;
  EXPECT_NE(qwen35()->render(c).find("<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n2\n</parameter>"),
            std::string::npos);
  ojson bad = msgs;
  bad[1]["tool_calls"][0]["function"]["arguments"] = "[1]";
  try {
    messages_for_template(ToolFormat::Xml, bad);
    ADD_FAILURE() << "accepted arguments that are not an object";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("messages[1].tool_calls[0].function.arguments"), std::string::npos) << e.what();
  }
}

TEST(ToolFormat, AutoFollowsTheTemplate) {
  EXPECT_EQ(resolve_tool_format("auto", qwen35().get()), ToolFormat::Xml);
  const auto qwen3_tok = Tokenizer::load(testing::qwen3_tokenizer_dir());
  const auto qwen3 = load_chat_template(*qwen3_tok);
  ASSERT_TRUE(qwen3);
  EXPECT_EQ(resolve_tool_format("auto", qwen3.get()), ToolFormat::Json);
  EXPECT_EQ(resolve_tool_format("auto", nullptr), ToolFormat::Json);
  // Qwen3-Coder's published template (a chat_template fixture) writes the same XML form.
  std::ifstream f(std::string(PYPTO_SOURCE_DIR) + "/tests/chat_template/templates/Qwen3-Coder.jinja", std::ios::binary);
  ASSERT_TRUE(f) << "missing the Qwen3-Coder template fixture";
  const std::string coder((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(resolve_tool_format("auto", ChatTemplate::parse(coder).get()), ToolFormat::Xml);
  EXPECT_EQ(resolve_tool_format("qwen3_coder", qwen3.get()), ToolFormat::Xml);
  EXPECT_EQ(resolve_tool_format("hermes", qwen35().get()), ToolFormat::Json);
  try {
    resolve_tool_format("mistral", nullptr);
    ADD_FAILURE() << "accepted an unknown parser";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--tool-call-parser 'mistral'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace pypto
