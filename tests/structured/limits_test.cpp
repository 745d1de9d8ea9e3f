// Every limit on a constraint's input (docs/api.md, "Input limits"): just over it is an Error
// naming the limit and the value found, just under it compiles. The over-the-limit inputs are
// the shapes that used to overflow the stack or eat the memory of the server (a schema nested
// thousands of levels deep, a chain of thousands of rules, a regex of nested groups).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "core/error.h"
#include "structured/compiled_grammar.h"
#include "structured/ebnf.h"
#include "structured/grammar_cache.h"
#include "structured/json_schema.h"
#include "structured/matcher.h"
#include "structured/regex.h"
#include "structured_test_util.h"

namespace pypto::structured::test {
namespace {

using nlohmann::json;

// The Error's message, or "no error".
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

std::string schema_error(const json& schema) {
  return error_of([&] { compile(json_schema_grammar(schema, "schema")); });
}

// `levels` schemas nested one in the other through `properties` (the innermost an integer).
// Built by moving each level into the next (copying would take the square of the depth).
json nested_properties(int levels) {
  json s = {{"type", "integer"}};
  for (int i = 1; i < levels; ++i) {
    json outer = {{"type", "object"}, {"required", {"a"}}};
    outer["properties"]["a"] = std::move(s);
    s = std::move(outer);
  }
  return s;
}

json nested_items(int levels) {
  json s = {{"type", "integer"}};
  for (int i = 1; i < levels; ++i) {
    json outer = {{"type", "array"}, {"maxItems", 1}};
    outer["items"] = std::move(s);
    s = std::move(outer);
  }
  return s;
}

// A root $ref to d0, each dI a $ref to dI+1, the last an integer: levels schemas in a chain.
json ref_chain(int levels) {
  json defs = json::object();
  for (int i = 0; i + 2 < levels; ++i) defs["d" + std::to_string(i)] = {{"$ref", "#/$defs/d" + std::to_string(i + 1)}};
  defs["d" + std::to_string(levels - 2)] = {{"type", "integer"}};
  return {{"$defs", defs}, {"$ref", "#/$defs/d0"}};
}

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(Limits, SchemaNestingThroughPropertiesItemsAndRefs) {
  auto deep = compile(json_schema_grammar(nested_properties(kMaxSchemaDepth), "schema"));
  std::string doc = "1";
  for (int i = 1; i < kMaxSchemaDepth; ++i) doc = "{\"a\":" + doc + "}";
  EXPECT_TRUE(accepts(*deep, doc));
  EXPECT_HAS(schema_error(nested_properties(kMaxSchemaDepth + 1)),
             "nesting depth 65 exceeds the limit of 64 (kMaxSchemaDepth)");
  // The shapes of the report: 3,000 levels of properties and 10,000 of items no longer
  // overflow the stack (they stop at the limit), and the message stays short.
  const std::string e = schema_error(nested_properties(3000));
  EXPECT_HAS(e, "(kMaxSchemaDepth)");
  EXPECT_LT(e.size(), 1000u);
  EXPECT_HAS(schema_error(nested_items(10000)), "(kMaxSchemaDepth)");
  EXPECT_EQ(schema_error(nested_items(kMaxSchemaDepth)), "no error");
  EXPECT_EQ(schema_error(ref_chain(kMaxSchemaDepth)), "no error");
  EXPECT_HAS(schema_error(ref_chain(kMaxSchemaDepth + 1)), "(kMaxSchemaDepth)");
}

json const_list(const char* kw, int n) {
  json list = json::array();
  for (int i = 0; i < n; ++i) list.push_back(kw == std::string("enum") ? json(i) : json{{"const", i}});
  return {{kw, list}};
}

TEST(Limits, SchemaBranchesEnumValuesAndPropertyCounts) {
  EXPECT_EQ(schema_error(const_list("anyOf", kMaxSchemaBranches)), "no error");
  EXPECT_HAS(schema_error(const_list("anyOf", kMaxSchemaBranches + 1)),
             "'anyOf' has 257 entries, more than the limit of 256 (kMaxSchemaBranches)");
  EXPECT_HAS(schema_error(const_list("oneOf", kMaxSchemaBranches + 1)), "(kMaxSchemaBranches)");
  EXPECT_EQ(schema_error(const_list("enum", kMaxEnumValues)), "no error");
  EXPECT_HAS(schema_error(const_list("enum", kMaxEnumValues + 1)),
             "'enum' has 4097 values, more than the limit of 4096 (kMaxEnumValues)");
  // A const's JSON text: the string plus its two quotes.
  EXPECT_EQ(schema_error({{"const", std::string(kMaxEnumValueBytes - 2, 'x')}}), "no error");
  EXPECT_HAS(schema_error({{"const", std::string(kMaxEnumValueBytes - 1, 'x')}}),
             "16385 bytes as JSON, more than the limit of 16384 (kMaxEnumValueBytes)");

  auto object_of = [](int n) {
    json props = json::object(), req = json::array();
    for (int i = 0; i < n; ++i) {
      props["p" + std::to_string(i)] = {{"type", "boolean"}};
      req.push_back("p" + std::to_string(i));
    }
    return json{{"type", "object"}, {"properties", props}, {"required", req}};
  };
  EXPECT_EQ(schema_error(object_of(kMaxProperties)), "no error");
  EXPECT_HAS(schema_error(object_of(kMaxProperties + 1)), "1025 entries, more than the limit of 1024 (kMaxProperties)");
  auto tuple_of = [](int n) {
    json s = {{"type", "array"}, {"items", false}};
    s["prefixItems"] = json(std::vector<json>(size_t(n), json{{"type", "null"}}));
    return s;
  };
  EXPECT_EQ(schema_error(tuple_of(kMaxPrefixItems)), "no error");
  EXPECT_HAS(schema_error(tuple_of(kMaxPrefixItems + 1)), "(kMaxPrefixItems)");
}

TEST(Limits, SchemaLengthsAndNumberBounds) {
  // Checked while the schema is read (the grammar of 100,000 free characters itself is refused
  // later by kMaxNfaStates, so these compare json_schema_grammar alone).
  auto read_error = [](const json& s) { return error_of([&] { json_schema_grammar(s, "schema"); }); };
  for (const char* kw : {"minLength", "maxLength"}) {
    EXPECT_EQ(read_error({{"type", "string"}, {kw, kMaxLengthKeyword}}), "no error") << kw;
    EXPECT_HAS(read_error({{"type", "string"}, {kw, kMaxLengthKeyword + 1}}),
               "= 100001 exceeds the limit of 100000 (kMaxLengthKeyword)");
  }
  EXPECT_EQ(read_error({{"type", "array"}, {"maxItems", kMaxLengthKeyword}}), "no error");
  EXPECT_HAS(read_error({{"type", "array"}, {"minItems", kMaxLengthKeyword + 1}}), "(kMaxLengthKeyword)");
  for (const char* type : {"integer", "number"}) {
    EXPECT_EQ(schema_error({{"type", type}, {"maximum", 9e18}}), "no error") << type;
    EXPECT_HAS(schema_error({{"type", type}, {"minimum", -9.5e18}}), "(kMaxNumberBound)");
  }
}

TEST(Limits, OneOfComparisonWork) {
  // Two branches of 4,096 distinct strings each are told apart in ~8,200 steps.
  auto strings = [](int n, const std::string& prefix) {
    json v = json::array();
    for (int i = 0; i < n; ++i) v.push_back(prefix + std::to_string(i));
    return json{{"enum", v}};
  };
  EXPECT_EQ(schema_error({{"oneOf", {strings(kMaxEnumValues, "a"), strings(kMaxEnumValues, "b")}}}), "no error");
  // 256 branches of 100 strings: 32,640 pairs of ~200 steps each.
  json many = json::array();
  for (int b = 0; b < kMaxSchemaBranches; ++b) many.push_back(strings(100, "b" + std::to_string(b) + "_"));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_HAS(schema_error({{"oneOf", many}}), "(kMaxDisjointSteps)");
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

TEST(Limits, GrammarTextBytes) {
  json big = json::array();
  for (int i = 0; i < 70; ++i) big.push_back(std::string(16000, char('a' + i % 26)) + std::to_string(i));
  EXPECT_HAS(schema_error({{"enum", big}}), "more than the limit of 1000000 (kMaxGrammarTextBytes)");
}

std::string regex_error(const std::string& pattern) {
  return error_of([&] {
    Grammar g;
    g.root = compile_regex(pattern, RegexMode::FullMatch, false);
    compile(g);
  });
}

TEST(Limits, RegexNestingRepeatsAndLength) {
  auto nested = [](int n) { return std::string(size_t(n), '(') + "a" + std::string(size_t(n), ')'); };
  EXPECT_EQ(regex_error(nested(kMaxRegexNesting)), "no error");
  EXPECT_HAS(regex_error(nested(kMaxRegexNesting + 1)), "groups nest deeper than the limit of 64 (kMaxRegexNesting)");
  EXPECT_HAS(regex_error(nested(30000)), "(kMaxRegexNesting)");  // used to overflow the stack
  EXPECT_EQ(regex_error("a{100000}"), "no error");
  EXPECT_HAS(regex_error("a{100001}"), "exceeds the limit of 100000 (kMaxRegexRepeat)");
  EXPECT_EQ(regex_error(std::string(kMaxRegexBytes, 'a')), "no error");
  EXPECT_HAS(regex_error(std::string(kMaxRegexBytes + 1, 'a')),
             "65537 bytes long, more than the limit of 65536 (kMaxRegexBytes)");
}

std::string ebnf_error(const std::string& text) {
  return error_of([&] { compile(parse_ebnf(text)); });
}

// root ::= r1, r1 ::= r2, ... each rule naming the next: inlined, as deep as it is long.
std::string rule_chain(int n) {
  std::string t = "root ::= r1\n";
  for (int i = 1; i < n; ++i) t += "r" + std::to_string(i) + " ::= r" + std::to_string(i + 1) + "\n";
  return t + "r" + std::to_string(n) + " ::= \"x\"\n";
}

TEST(Limits, EbnfNestingRulesRepeatsAndLength) {
  auto nested = [](int n) { return "root ::= " + std::string(size_t(n), '(') + "\"a\"" + std::string(size_t(n), ')'); };
  EXPECT_EQ(ebnf_error(nested(kMaxEbnfNesting)), "no error");
  EXPECT_HAS(ebnf_error(nested(kMaxEbnfNesting + 1)), "groups nest deeper than the limit of 64 (kMaxEbnfNesting)");
  EXPECT_EQ(ebnf_error("root ::= \"a\"{100000}"), "no error");
  EXPECT_HAS(ebnf_error("root ::= \"a\"{100001}"), "(kMaxEbnfRepeat)");
  EXPECT_EQ(ebnf_error(rule_chain(1000)), "no error");
  EXPECT_HAS(ebnf_error(rule_chain(kMaxEbnfRules)), "more than 4096 rules, the limit (kMaxEbnfRules)");
  // Within kMaxEbnfRules but a chain deeper than the builder's limit (see the next test).
  EXPECT_HAS(ebnf_error(rule_chain(kMaxEbnfRules - 1)), "(kMaxGrammarNesting)");
  std::string text = "root ::= \"" + std::string(kMaxEbnfBytes - 12, 'a') + "\"\n";
  EXPECT_EQ(text.size(), size_t(kMaxEbnfBytes));
  EXPECT_EQ(ebnf_error(text), "no error");
  EXPECT_HAS(ebnf_error(text + " "), "(kMaxEbnfBytes)");
}

TEST(Limits, GrammarNestingOfInlinedRules) {
  // The builder recurses once per inlined rule: a chain longer than kMaxGrammarNesting is
  // refused (it used to overflow the stack at ~100,000 rules).
  Grammar g;
  const int n = CompiledGrammar::kMaxGrammarNesting;
  for (int i = 0; i < n; ++i) g.add_rule("r" + std::to_string(i));
  for (int i = 0; i + 1 < n; ++i) g.rules[size_t(i)].body = ref(i + 1);
  g.rules[size_t(n - 1)].body = literal("x");
  g.root = ref(0);
  EXPECT_HAS(error_of([&] { compile(g); }), "nests deeper than the limit of 2000 levels (kMaxGrammarNesting)");
  g.root = ref(5);  // 1,995 rules + the root's reference and the literal: within the limit
  EXPECT_EQ(error_of([&] { compile(g); }), "no error");
}

TEST(Limits, DeterminizedStatesAreBounded) {
  // (.*a.{n}): the classic language whose DFA has 2^(n+1) states. Stepping through ever new
  // states stops at kMaxDfaStates with an Error instead of growing without bound.
  Grammar g;
  g.root = compile_regex("[ab]*a[ab]{20}", RegexMode::FullMatch, false);
  auto cg = compile(g);
  std::mt19937_64 rng(1);
  const std::string e = error_of([&] {
    int32_t s = cg->start_state();
    for (int i = 0; i < 4'000'000; ++i) s = cg->step(s, rng() % 2 ? 'a' : 'b');
  });
  EXPECT_HAS(e, "(kMaxDfaStates)");
  EXPECT_LE(cg->num_dfa_states(), CompiledGrammar::kMaxDfaStates);
}

TEST(Limits, MatcherEndsTheOutputWhenTheAutomatonOutgrowsItsLimits) {
  // The same language driven through a matcher, as the engine drives it: once a mask or a step
  // needs a state past kMaxDfaStates, the matcher breaks with the reason and allows only EOS.
  Grammar g;
  g.root = compile_regex("[ab]*a[ab]{20}", RegexMode::FullMatch, false);
  GrammarMatcher m(compile(g), {});
  std::mt19937_64 rng(2);
  for (int i = 0; i < 2'000'000 && !m.is_broken(); ++i) {
    const TokenMask* mask = m.next_mask();
    const int32_t tok = rng() % 2 ? 'a' : 'b';
    if (m.is_broken()) break;
    ASSERT_TRUE(((*mask)[size_t(tok) >> 5] >> (tok & 31)) & 1) << i;
    m.accept(tok);
  }
  ASSERT_TRUE(m.is_broken());
  EXPECT_HAS(m.error(), "(kMaxDfaStates)");
  const TokenMask& only = *m.next_mask();
  for (int32_t id = 0; id <= kByteEos; ++id)
    EXPECT_EQ(((only[size_t(id) >> 5] >> (id & 31)) & 1) != 0, id == kByteEos) << id;
}

TEST(Limits, GrammarCacheBytes) {
  auto make = [](int n) {
    return [n] {
      Grammar g;
      g.root = repeat(byte_range('a', 'z'), 0, n);
      return g;
    };
  };
  GrammarCache tight(byte_vocab(), 64, 1);  // every grammar is over 1 byte: only the newest stays
  GrammarCache roomy(byte_vocab(), 64);
  for (int i = 1; i <= 3; ++i) {
    EXPECT_GT(tight.get("k" + std::to_string(i), make(100 * i))->memory_bytes(), 100 * i * 8);
    roomy.get("k" + std::to_string(i), make(100 * i));
  }
  EXPECT_EQ(tight.size(), 1u);
  EXPECT_EQ(roomy.size(), 3u);
}

}  // namespace
}  // namespace pypto::structured::test
