// The XML tool-call grammar (structured/xml_tool_grammar.h) against its parser
// (serve/xml_tool_parser.h) and ajv: random outputs of the grammar, read back by the parser,
// must be one call whose arguments ajv (an independent JSON Schema validator) accepts under the
// tool's schema; and the grammar refuses what the parser could not read back. Random walks need
// bounded values to end, so unbounded raw text is checked with hand-written outputs.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "serve/xml_tool_parser.h"
#include "structured/structured_test_util.h"
#include "structured/xml_tool_grammar.h"

namespace pypto {
namespace {

namespace st = pypto::structured;
using ojson = nlohmann::ordered_json;

const ojson kFunctions = ojson::parse(R"([
  {"name": "get_weather", "parameters": {"type": "object", "required": ["city", "days"], "properties": {
     "city": {"type": "string", "maxLength": 8}, "days": {"type": "integer", "minimum": 1, "maximum": 14},
     "metric": {"type": "boolean"}, "unit": {"type": "string", "enum": ["c", "f"]},
     "note": {"type": ["string", "null"], "maxLength": 4}}}},
  {"name": "plot", "parameters": {"type": "object", "required": ["points"], "properties": {
     "points": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 5}, "maxItems": 3},
     "style": {"type": "object", "properties": {"bold": {"type": "boolean"}}, "required": ["bold"],
               "additionalProperties": false},
     "title": {"type": "string", "maxLength": 5}}}},
  {"name": "ping"}
])");

std::shared_ptr<const st::CompiledGrammar> body_grammar(const ojson& fn) {
  st::Grammar g;
  g.root = st::add_xml_call_body(g, fn, "tools[0].function");
  return st::test::compile(g);
}

TEST(XmlToolGrammar, RandomOutputsParseAndValidate) {
  std::mt19937_64 rng(7);
  std::vector<std::pair<nlohmann::json, std::string>> cases;
  ojson tools = ojson::array();
  for (const ojson& fn : kFunctions) tools.push_back({{"type", "function"}, {"function", fn}});
  for (const ojson& fn : kFunctions) {
    const auto g = body_grammar(fn);
    const nlohmann::json schema = fn.contains("parameters") ? nlohmann::json::parse(fn["parameters"].dump())
                                                            : nlohmann::json{{"type", "object"}, {"maxProperties", 0}};
    for (int i = 0; i < 60; ++i) {
      const std::string body = st::test::random_output(*g, rng, 0.5);
      int next = 0;
      XmlToolCallParser p(tools, [&next] { return "call_" + std::to_string(next++); });
      ToolCallStream::Delta d = p.append("<tool_call>\n" + body + "\n</tool_call>");
      ToolCallStream::Delta f = p.flush();
      ASSERT_EQ(p.calls().size(), 1u) << body;
      EXPECT_EQ(p.calls()[0].name, fn["name"].get<std::string>());
      EXPECT_EQ(d.content + f.content, "") << body;
      cases.push_back({schema, p.calls()[0].arguments});
    }
  }
  const std::vector<nlohmann::json> verdicts = st::test::ajv_validate(cases);
  ASSERT_EQ(verdicts.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_TRUE(verdicts[i]["valid"].get<bool>()) << cases[i].second << ": " << verdicts[i]["error"];
}

TEST(XmlToolGrammar, AcceptsTheTemplateFormAndRefusesWhatCannotBeReadBack) {
  ojson fn = kFunctions[1];
  fn["parameters"]["properties"]["title"].erase("maxLength");  // unbounded raw text
  const auto g = body_grammar(fn);
  EXPECT_TRUE(st::test::accepts(*g, "<function=plot>\n<parameter=points>\n[1,2]\n</parameter>\n"
                                     "<parameter=title>\nA <b> title\non two lines\n</parameter>\n</function>"));
  EXPECT_TRUE(st::test::accepts(*g, "<function=plot>\n<parameter=points>\n[]\n</parameter>\n</function>"));
  // A required parameter missing; an undeclared one; "</" inside raw text; a wrong type.
  EXPECT_FALSE(st::test::accepts(*g, "<function=plot>\n</function>"));
  EXPECT_FALSE(st::test::accepts(*g, "<function=plot>\n<parameter=points>\n[]\n</parameter>\n"
                                      "<parameter=colour>\nred\n</parameter>\n</function>"));
  EXPECT_FALSE(st::test::accepts(*g, "<function=plot>\n<parameter=points>\n[]\n</parameter>\n"
                                      "<parameter=title>\na</b>\n</parameter>\n</function>"));
  EXPECT_FALSE(st::test::accepts(*g, "<function=plot>\n<parameter=points>\n\"x\"\n</parameter>\n</function>"));
}

TEST(XmlToolGrammar, RefusesStringKeywordsItCannotEnforce) {
  for (const char* kw : {R"({"type": "string", "pattern": "^a+$"})", R"({"type": "string", "format": "date"})"}) {
    const ojson fn = {{"name", "f"}, {"parameters", {{"type", "object"}, {"properties", {{"x", ojson::parse(kw)}}}}}};
    st::Grammar g;
    try {
      st::add_xml_call_body(g, fn, "tools[0].function");
      ADD_FAILURE() << "accepted " << kw;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tools[0].function.parameters.properties.x."), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pypto
