// Recursion without a depth limit: $ref cycles, json_object nesting and recursive EBNF rules run
// on a return stack, so nesting far beyond any fixed unrolling is accepted while the structure
// stays exact (every opener closed by its own closer). Deep documents are built by nlohmann (an
// independent writer) and checked by ajv; masks at depth are checked bit by bit against stepping.
#include <gtest/gtest.h>

#include <random>

#include "core/error.h"
#include "structured/ebnf.h"
#include "structured/json_schema.h"
#include "structured_test_util.h"

namespace pypto::structured::test {
namespace {

using nlohmann::json;

const char* kListSchema =
    R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":0,"maximum":9},)"
    R"("next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"],"additionalProperties":false}},)"
    R"("$ref":"#/$defs/node"})";
const char* kTreeSchema =
    R"({"$defs":{"t":{"type":"object","properties":{"k":{"type":"string","maxLength":2},)"
    R"("kids":{"type":"array","items":{"$ref":"#/$defs/t"},"maxItems":2}},"required":["k","kids"],"additionalProperties":false}},)"
    R"("$ref":"#/$defs/t"})";

json linked_list(int depth) {
  json n = {{"v", depth % 10}, {"next", nullptr}};
  for (int i = depth - 1; i > 0; --i) n = {{"v", i % 10}, {"next", n}};
  return n;
}

json random_tree(std::mt19937_64& rng, int depth) {
  json t = {{"k", std::string(1, char('a' + rng() % 26))}, {"kids", json::array()}};
  if (depth > 0) {
    t["kids"].push_back(random_tree(rng, depth - 1));  // one spine of full depth
    if (rng() % 2) t["kids"].push_back(random_tree(rng, int(rng() % uint64_t(depth))));
  }
  return t;
}

TEST(Recursion, RefCycleNestsBeyondAnyUnrolling) {
  auto g = compile(json_schema_grammar(json::parse(kListSchema), "schema"));
  std::vector<std::pair<json, std::string>> cases;
  for (int depth : {1, 7, 8, 9, 30, 200}) {
    // Indented only where the indent stays within the 40-byte whitespace limit.
    const std::string text = linked_list(depth).dump(depth <= 30 ? 1 : -1);
    EXPECT_TRUE(accepts(*g, text)) << "depth " << depth;
    // One closer short, one too many, and a value out of range at the deepest level.
    EXPECT_FALSE(accepts(*g, text.substr(0, text.size() - 1))) << depth;
    EXPECT_TRUE(accepts_prefix(*g, text.substr(0, text.size() - 1))) << depth;
    EXPECT_FALSE(accepts_prefix(*g, text + "}")) << depth;
    cases.push_back({json::parse(kListSchema), text});
  }
  std::string bad = linked_list(40).dump();
  bad.replace(bad.rfind("\"v\":0"), 5, "\"v\":10");  // 40 % 10 == 0 at the deepest node
  EXPECT_FALSE(accepts_prefix(*g, bad));
  const std::vector<json> verdicts = ajv_validate(cases);
  for (size_t i = 0; i < cases.size(); ++i) EXPECT_TRUE(verdicts[i]["valid"].get<bool>()) << cases[i].second;
}

TEST(Recursion, RandomDeepOutputsValidateWithAjv) {
  // Random walks that rarely stop go deep; ajv judges every one.
  std::mt19937_64 rng(5);
  std::vector<std::pair<json, std::string>> cases;
  int deepest = 0;
  for (const char* schema : {kListSchema, kTreeSchema}) {
    auto g = compile(json_schema_grammar(json::parse(schema), "schema"));
    for (int i = 0; i < 40; ++i) {
      const std::string out = random_output(*g, rng, 0.02);
      int depth = 0, d = 0;
      for (char c : out) depth = std::max(depth, d += c == '{' ? 1 : c == '}' ? -1 : 0);
      deepest = std::max(deepest, depth);
      cases.push_back({json::parse(schema), out});
    }
    // Trees built by nlohmann, deeper than the old unrolling.
    for (int depth : {8, 12, 25}) {
      const std::string text = random_tree(rng, depth).dump(depth <= 8 ? 2 : -1);
      EXPECT_TRUE(schema != kTreeSchema || accepts(*g, text)) << text;
      if (schema == kTreeSchema) cases.push_back({json::parse(schema), text});
    }
  }
  EXPECT_GT(deepest, 8);
  const std::vector<json> verdicts = ajv_validate(cases);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_TRUE(verdicts[i]["valid"].get<bool>()) << cases[i].second << "\najv: " << verdicts[i]["error"];
}

TEST(Recursion, JsonObjectModeNestsAnyDepthWithMatchedClosers) {
  auto g = compile(json_object_grammar());
  for (int depth : {8, 50, 300}) {
    json v = json::array({1, "x"});
    for (int i = 0; i < depth; ++i) v = i % 3 == 0 ? json{{"k", v}} : i % 3 == 1 ? json::array({v, nullptr}) : json{{"a", 1}, {"b", v}};
    if (!v.is_object()) v = {{"top", v}};
    const std::string text = v.dump();
    EXPECT_TRUE(accepts(*g, text)) << depth;
    // Swap the last closer for the other kind: the stack knows which one was opened.
    std::string swapped = text;
    const size_t p = swapped.find_last_of("}]", swapped.size() - 2);
    swapped[p] = swapped[p] == '}' ? ']' : '}';
    EXPECT_FALSE(accepts_prefix(*g, swapped)) << depth;
  }
}

TEST(Recursion, MaskAtDepthAgreesWithStepping) {
  auto vocab = qwen3_vocab();
  ASSERT_NE(vocab, nullptr);
  auto g = compile(json_object_grammar(), vocab);
  std::string prefix;
  for (int i = 0; i < 40; ++i) prefix += "{\"a\": [";
  prefix += "[1, 2";
  const int32_t s = g->step_text(g->start_state(), prefix);
  ASSERT_GE(s, 0);
  const TokenMask& m = *g->mask(s);
  int64_t allowed = 0;
  for (int32_t id = 0; id < int32_t(kQwen3Logits); ++id) {
    const std::string& text = vocab->token_text(id);
    const bool is_eos = id == 151645 || id == 151643;
    const bool expect = !is_eos && !text.empty() && g->step_text(s, text) >= 0;
    ASSERT_EQ(bool((m[size_t(id) >> 5] >> (id & 31)) & 1), expect) << "token " << id << " '" << text << "'";
    allowed += expect;
  }
  EXPECT_GT(allowed, 10);
  // The whole way out is accepted only with every closer.
  std::string close = "]";
  for (int i = 0; i < 40; ++i) close += "]}";
  EXPECT_TRUE(g->is_accepting(g->step_text(s, close)));
  EXPECT_FALSE(g->is_accepting(g->step_text(s, close.substr(0, close.size() - 2))));
}

TEST(Recursion, EbnfRecursionAndLeftRecursionIsRefused) {
  auto g = compile(parse_ebnf("root ::= (\"(\" root \")\")*"));
  std::string deep(60, '(');
  deep += std::string(60, ')');
  EXPECT_TRUE(accepts(*g, deep + "()(())"));
  EXPECT_FALSE(accepts(*g, deep.substr(1)));
  EXPECT_TRUE(accepts_prefix(*g, deep.substr(0, 90)));
  auto error_of = [](const char* text) -> std::string {
    try {
      compile(parse_ebnf(text));
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("grammar rule 'root' is left-recursive"), std::string::npos);
  EXPECT_NE(error_of("root ::= x\nx ::= \"\"? y \"a\" | \"b\"\ny ::= x \"c\"").find("is left-recursive"),
            std::string::npos);
  EXPECT_EQ(error_of("root ::= \"a\" root | \"b\""), "no error");
}

}  // namespace
}  // namespace pypto::structured::test
