// The worst grammars the limits allow (or the largest work before one refuses a grammar),
// compiled as the server compiles them: through GrammarCache, with the Qwen3 vocabulary and the
// first mask. Each must finish within a bounded time on the request thread; the times are
// printed (docs/api.md, "Input limits", quotes them with the CPU they were measured on).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <string>

#include "core/error.h"
#include "structured/ebnf.h"
#include "structured/grammar_cache.h"
#include "structured/json_schema.h"
#include "structured/regex.h"
#include "structured_test_util.h"

namespace pypto::structured::test {
namespace {

using nlohmann::json;

// Seconds to compile `make()` as the server does, and its outcome ("ok" or the error).
std::pair<double, std::string> timed_compile(const std::function<Grammar()>& make) {
  GrammarCache cache(qwen3_vocab(), 1);
  const auto t0 = std::chrono::steady_clock::now();
  std::string outcome = "ok";
  try {
    auto g = cache.get("k", make);
    outcome = "ok, " + std::to_string(g->num_nfa_states()) + " NFA / " + std::to_string(g->num_dfa_states()) +
              " DFA states";
  } catch (const Error& e) {
    outcome = e.what();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("  %-44s %7.3f s  %.160s\n", "", s, outcome.c_str());
  return {s, outcome};
}

constexpr double kBoundSeconds = 10.0;  // ~10x the slowest case measured on a 2-core VM

TEST(CompileBudget, WorstAllowedGrammarsCompileInBoundedTime) {
  ASSERT_NE(qwen3_vocab(), nullptr);
  struct Case {
    const char* name;
    std::function<Grammar()> make;
  };
  auto schema = [](json s) { return [s] { return json_schema_grammar(s, "schema"); }; };
  auto regex = [](std::string p) {
    return [p] {
      Grammar g;
      g.root = compile_regex(p, RegexMode::FullMatch, false);
      return g;
    };
  };
  // Optional properties: the object's grammar grows with their square.
  json optional_props = {{"type", "object"}, {"properties", json::object()}};
  for (int i = 0; i < 120; ++i) optional_props["properties"]["p" + std::to_string(i)] = {{"type", "boolean"}};
  // Each rule names the next twice: inlining doubles per level, up to kMaxNfaStates.
  std::string doubling = "root ::= a0\n";
  for (int i = 0; i < 24; ++i) doubling += "a" + std::to_string(i) + " ::= a" + std::to_string(i + 1) + " a" + std::to_string(i + 1) + "\n";
  doubling += "a24 ::= \"x\"\n";
  // Mutually recursive rules: many fragments and calls for the liveness passes.
  std::string calls = "root ::= r0\n";
  for (int i = 0; i < 1500; ++i)
    calls += "r" + std::to_string(i) + " ::= \"(\" r" + std::to_string(i + 1) + " \")\" | \"x\" r0\n";
  calls += "r1500 ::= \"y\" | \"(\" r0 \")\"\n";
  json oneof = json::array();
  for (int b = 0; b < kMaxSchemaBranches; ++b) {
    json v = json::array();
    for (int i = 0; i < 100; ++i) v.push_back("b" + std::to_string(b) + "_" + std::to_string(i));
    oneof.push_back({{"enum", v}});
  }
  const std::vector<Case> cases = {
      {"string maxLength 100000 (refused: NFA cap)", schema({{"type", "string"}, {"maxLength", kMaxLengthKeyword}})},
      {"string maxLength 20000", schema({{"type", "string"}, {"maxLength", 20000}})},
      {"object, 120 optional properties", schema(optional_props)},
      {"array minItems/maxItems 100000 of integers", schema({{"type", "array"}, {"items", {{"type", "integer"}}},
                                                            {"maxItems", kMaxLengthKeyword}})},
      {"pattern x maxLength (length product)", schema({{"type", "string"}, {"pattern", "^[a-z0-9]*(ab|cd)*$"},
                                                      {"maxLength", 20000}})},
      {"oneOf 256 x 100-value enums (disjoint budget)", schema({{"oneOf", oneof}})},
      {"enum of 4096 values", schema({{"enum", [] {
                                         json v = json::array();
                                         for (int i = 0; i < kMaxEnumValues; ++i) v.push_back("value_" + std::to_string(i));
                                         return v;
                                       }()}})},
      {"EBNF rules doubling 2^25 (refused: NFA cap)", [doubling] { return parse_ebnf(doubling); }},
      {"EBNF 1500 mutually recursive rules", [calls] { return parse_ebnf(calls); }},
      {"regex .*a.{12}", regex(".*a.{12}")},
      {"regex .*a.{20}", regex(".*a.{20}")},
      {"regex (a{1000}){1000} (refused: NFA cap)", regex("(a{1000}){1000}")},
  };
  double worst = 0;
  for (const Case& c : cases) {
    std::printf("%s\n", c.name);
    const auto [s, outcome] = timed_compile(c.make);
    worst = std::max(worst, s);
    EXPECT_LT(s, kBoundSeconds) << c.name << ": " << outcome;
  }
  std::printf("worst: %.3f s\n", worst);
}

}  // namespace
}  // namespace pypto::structured::test
