// JSON Schema compilation. Validity is judged by ajv (tests/structured/ajv_validate.mjs), an
// independent validator, and numeric ranges by plain arithmetic; rejection cases are hand-made
// JSON that the schema plainly forbids.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "core/error.h"
#include "schemas.h"
#include "structured/json_schema.h"
#include "structured_test_util.h"

namespace pypto::structured::test {
namespace {

using nlohmann::json;

std::shared_ptr<const CompiledGrammar> schema_grammar(const std::string& text) {
  return compile(json_schema_grammar(json::parse(text), "schema"));
}

TEST(JsonSchema, RandomOutputsValidateWithAjv) {
  std::mt19937_64 rng(42);
  std::vector<std::pair<json, std::string>> cases;
  for (const std::string& text : test_schemas()) {
    auto g = schema_grammar(text);
    for (int i = 0; i < 30; ++i) cases.push_back({json::parse(text), random_output(*g, rng, 0.5)});
  }
  const std::vector<json> verdicts = ajv_validate(cases);
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_TRUE(verdicts[i]["valid"].get<bool>())
        << "schema " << cases[i].first.dump() << "\noutput " << cases[i].second << "\najv: " << verdicts[i]["error"];
}

TEST(JsonSchema, RejectsWhatTheSchemaForbids) {
  auto person = schema_grammar(test_schemas()[0]);
  EXPECT_TRUE(accepts(*person, R"({"age": 30, "name": "Ann"})"));
  EXPECT_TRUE(accepts(*person, "{\n  \"age\": 0,\n  \"name\": \"\"\n}"));
  EXPECT_FALSE(accepts(*person, R"({"age": 131, "name": "Ann"})"));       // above maximum
  EXPECT_FALSE(accepts(*person, R"({"age": 30})"));                       // name required
  EXPECT_FALSE(accepts(*person, R"({"age": 30, "name": "Annabelle-Lee"})"));  // 13 > maxLength
  EXPECT_FALSE(accepts(*person, R"({"age": 30, "name": "A", "x": 1})"));  // additionalProperties
  EXPECT_FALSE(accepts(*person, R"({"age": 3.5, "name": "A"})"));         // integer
  EXPECT_FALSE(accepts(*person, R"({"age": 030, "name": "A"})"));         // leading zero
  auto colors = schema_grammar(test_schemas()[2]);
  EXPECT_TRUE(accepts(*colors, "\"green\""));
  EXPECT_FALSE(accepts(*colors, "\"yellow\""));
  auto dict = schema_grammar(R"({"type":"object","additionalProperties":{"type":"integer","minimum":0,"maximum":99}})");
  EXPECT_TRUE(accepts(*dict, R"({"a": 1, "b": 99})"));
  EXPECT_FALSE(accepts(*dict, R"({"a": 100})"));
  auto list = schema_grammar(test_schemas()[11]);
  EXPECT_TRUE(accepts(*list, R"({"next": {"next": null, "v": 2}, "v": 1})"));
  EXPECT_FALSE(accepts(*list, R"({"next": {"next": 5, "v": 2}, "v": 1})"));
  auto date = schema_grammar(test_schemas()[4]);
  EXPECT_TRUE(accepts(*date, R"({"at": "23:59:59Z", "when": "2024-04-30"})"));
  EXPECT_FALSE(accepts(*date, R"({"at": "23:59:59Z", "when": "2024-04-31"})"));
  EXPECT_FALSE(accepts(*date, R"({"at": "24:00:00Z", "when": "2024-04-30"})"));
}

TEST(JsonSchema, IntegerRangesMatchArithmetic) {
  std::mt19937_64 rng(3);
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 0}, {-7, 7}, {13, 487}, {-1000, -999}, {-305, 42},
                                                           {99, 1001}, {5, 5}, {-20, -3}, {0, 100000}};
  for (auto [lo, hi] : ranges) {
    auto g = schema_grammar(json{{"type", "integer"}, {"minimum", lo}, {"maximum", hi}}.dump());
    for (int64_t v = lo - 1200; v <= hi + 1200; v += (hi - lo > 5000 ? 7 : 1))
      ASSERT_EQ(accepts(*g, std::to_string(v)), lo <= v && v <= hi) << v << " in [" << lo << ", " << hi << "]";
    EXPECT_FALSE(accepts(*g, "-0"));
  }
  auto min_only = schema_grammar(R"({"type":"integer","minimum":250})");
  for (int64_t v : {249LL, 250LL, 999LL, 1000LL, 123456789LL, 9223372036854775807LL})
    EXPECT_EQ(accepts(*min_only, std::to_string(v)), v >= 250) << v;
  auto max_only = schema_grammar(R"({"type":"integer","exclusiveMaximum":-10})");
  for (int64_t v : {-9LL, -10LL, -11LL, -5000LL, 0LL, 7LL}) EXPECT_EQ(accepts(*max_only, std::to_string(v)), v < -10) << v;
}

std::string error_of(const std::string& schema) {
  try {
    json_schema_grammar(json::parse(schema), "response_format.json_schema.schema");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(JsonSchema, NumberRangesMatchArithmetic) {
  // Integer, fractional and exclusive bounds: a number text is accepted exactly when its value
  // is in range. Values have at most 4 decimals and bounds are short decimals, so comparing the
  // parsed doubles is exact arithmetic here.
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-30, 30);
  struct Case {
    const char* schema;
    double lo, hi;
    bool lo_excl, hi_excl;
  };
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<Case> cases = {
      {R"({"type":"number","minimum":-5,"maximum":5})", -5, 5, false, false},
      {R"({"type":"number","minimum":0,"maximum":1})", 0, 1, false, false},
      {R"({"type":"number","minimum":-10,"maximum":-2})", -10, -2, false, false},
      {R"({"type":"number","minimum":2.5,"maximum":20.125})", 2.5, 20.125, false, false},
      {R"({"type":"number","exclusiveMinimum":-3.75,"exclusiveMaximum":-3.5})", -3.75, -3.5, true, true},
      {R"({"type":"number","exclusiveMinimum":0,"maximum":0.3})", 0, 0.3, true, false},
      {R"({"type":"number","minimum":-0.05,"exclusiveMaximum":0})", -0.05, 0, false, true},
      {R"({"type":"number","exclusiveMinimum":1.1})", 1.1, inf, true, false},
      {R"({"type":"number","exclusiveMaximum":-7.25})", -inf, -7.25, false, true},
      {R"({"type":"number","minimum":3,"exclusiveMinimum":3,"maximum":3.5,"exclusiveMaximum":4})", 3, 3.5, true, false},
      {R"({"type":"number","minimum":12.0625,"maximum":12.0625})", 12.0625, 12.0625, false, false},
  };
  for (const Case& c : cases) {
    auto g = schema_grammar(c.schema);
    std::vector<std::string> texts;
    for (int i = 0; i < 3000; ++i) {
      char buf[40];
      const double span = std::isinf(c.lo) || std::isinf(c.hi) ? 30 : std::max(1.0, c.hi - c.lo) * 1.5;
      const double mid = std::isinf(c.lo) ? c.hi : std::isinf(c.hi) ? c.lo : (c.lo + c.hi) / 2;
      std::snprintf(buf, sizeof buf, "%.*f", int(rng() % 5), mid + (u(rng) / 30) * span);
      texts.push_back(buf);
    }
    // The bounds themselves, written several ways, and their neighbours.
    for (double b : {c.lo, c.hi}) {
      if (std::isinf(b)) continue;
      for (const char* fmt : {"%.0f", "%.1f", "%.4f", "%.6f", "%g"}) {
        char buf[40];
        std::snprintf(buf, sizeof buf, fmt, b);
        texts.push_back(buf);
        std::snprintf(buf, sizeof buf, fmt, b + 0.0001);
        texts.push_back(buf);
        std::snprintf(buf, sizeof buf, fmt, b - 0.0001);
        texts.push_back(buf);
      }
    }
    for (const std::string& s : texts) {
      if (s.find('e') != std::string::npos || s.rfind("-0", 0) == 0 && std::stod(s) == 0) continue;
      const double v = std::stod(s);
      const bool in = (c.lo_excl ? v > c.lo : v >= c.lo) && (c.hi_excl ? v < c.hi : v <= c.hi);
      ASSERT_EQ(accepts(*g, s), in) << s << " for " << c.schema;
    }
  }
  // Fraction digits stop at 15 significant digits where a number meets an exclusive bound, so
  // no output parses to the bound's own double.
  auto g = schema_grammar(R"({"type":"number","exclusiveMinimum":100.5,"maximum":101})");
  EXPECT_TRUE(accepts(*g, "100.500000000001"));
  EXPECT_FALSE(accepts(*g, "100.5000000000001"));
  EXPECT_FALSE(accepts(*g, "100.5"));
  EXPECT_FALSE(accepts(*g, "100.50"));
  EXPECT_NE(error_of(R"({"type":"number","exclusiveMinimum":1.5,"maximum":1.5})").find("the bounds leave no value"),
            std::string::npos);
}

TEST(JsonSchema, UnsupportedOrInvalidSchemasAreErrorsNamingTheProblem) {
  EXPECT_EQ(error_of(R"({"type":"object","properties":{"a":{"type":"string","not":{"const":"x"}}}})"),
            "response_format.json_schema.schema/properties/a: unsupported JSON Schema keyword 'not'");
  EXPECT_NE(error_of(R"({"type":"array","uniqueItems":true})").find("'uniqueItems'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"strin"})").find("unknown type 'strin'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","minLength":5,"maxLength":2})").find("minLength > maxLength"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"#/$defs/missing"})").find("'#/$defs/missing' does not exist"), std::string::npos);
  EXPECT_NE(error_of(R"({"$ref":"http://x/y.json"})").find("only local references"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","format":"ipv4"})").find("unsupported format 'ipv4'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"integer","minimum":5,"maximum":1})").find("minimum 5 > maximum 1"), std::string::npos);
  EXPECT_NE(error_of(R"({"enum":[]})").find("'enum' must be a non-empty array"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"object","properties":{"a":false}})").find("/properties/a: the schema 'false'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"object","required":["b"],"properties":{"a":{}}})").find("'b' is not in 'properties'"), std::string::npos);
  EXPECT_NE(error_of(R"({"type":"string","pattern":"(a"})").find("/pattern: regex '(a': missing ')'"), std::string::npos);
  EXPECT_NE(error_of("42").find("must be an object or a boolean"), std::string::npos);
  EXPECT_NE(error_of(R"({"allOf":[{"type":"string"},{"maxLength":3}]})").find("'allOf' is supported only with exactly one schema"),
            std::string::npos);
  EXPECT_EQ(error_of(R"({"$defs":{"a":{"type":"integer"}},"allOf":[{"$ref":"#/$defs/a"}],"description":"x"})"), "no error");
}

TEST(JsonSchema, OneOfNeedsBranchesThatCannotBothMatch) {
  // Accepted: branches told apart by type, values, ranges, lengths, a discriminator property or a
  // property the other branch forbids (ajv checks "exactly one" on random outputs of such
  // schemas in RandomOutputsValidateWithAjv).
  for (const char* ok : {
           R"({"oneOf":[{"type":"string"},{"type":["integer","null"]}]})",
           R"({"oneOf":[{"enum":["a","b"]},{"const":"c"},{"type":"integer"}]})",
           R"({"oneOf":[{"type":"number","maximum":0},{"type":"number","exclusiveMinimum":0}]})",
           R"({"oneOf":[{"type":"string","maxLength":2},{"type":"string","minLength":3}]})",
           R"({"oneOf":[{"type":"object","properties":{"k":{"const":1},"v":{}},"required":["k"]},)"
           R"({"type":"object","properties":{"k":{"const":2}},"required":["k"]}]})",
           R"({"$defs":{"s":{"type":"string"}},"oneOf":[{"$ref":"#/$defs/s"},{"anyOf":[{"type":"null"},{"type":"boolean"}]}]})",
       })
    EXPECT_EQ(error_of(ok), "no error") << ok;
  // Refused, naming the two branches: a value could match both.
  for (const char* overlap : {
           R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":3}]})",
           R"({"oneOf":[{"type":"number"},{"type":"integer"}]})",
           R"({"oneOf":[{"type":"number","minimum":0},{"type":"number","maximum":0}]})",
           R"({"oneOf":[{"enum":[1,2]},{"enum":[2,3]}]})",
           R"({"oneOf":[{"type":"object","properties":{"a":{}}},{"type":"object","properties":{"b":{}}}]})",
           R"({"oneOf":[{"type":"integer"},{"const":3}]})",
       }) {
    const std::string e = error_of(overlap);
    EXPECT_NE(e.find("/oneOf: branches 0 and 1 may both match one value"), std::string::npos) << overlap << ": " << e;
  }
  EXPECT_NE(error_of(R"({"oneOf":[{"type":"null"},{"type":"string"},{"type":"string","maxLength":1}]})")
                .find("branches 1 and 2 may both match"),
            std::string::npos);
}

TEST(JsonSchema, PatternWithLengthCountsDecodedCharacters) {
  // minLength / maxLength count code points of the decoded string: an escape (\n, \", \u001f)
  // and a multi-byte UTF-8 character count once. Checked on random outputs, decoded by
  // nlohmann, and on hand-written texts.
  const std::string schema = R"({"type":"string","pattern":"^[a\u00e9\n\"\u001f]*$","minLength":2,"maxLength":4})";
  auto g = schema_grammar(schema);
  std::mt19937_64 rng(11);
  for (int i = 0; i < 400; ++i) {
    const std::string out = random_output(*g, rng, 0.3);
    const std::string decoded = json::parse(out).get<std::string>();
    int64_t chars = 0;
    for (unsigned char c : decoded) chars += (c & 0xC0) != 0x80;
    EXPECT_TRUE(chars >= 2 && chars <= 4) << out;
    EXPECT_EQ(decoded.find_first_not_of("a\xC3\xA9\n\"\x1f"), std::string::npos) << out;
  }
  EXPECT_TRUE(accepts(*g, R"("a\n\u001f")"));  // 3 characters in 9 bytes
  EXPECT_FALSE(accepts(*g, R"("a")"));
  EXPECT_TRUE(accepts(*g, "\"\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\""));  // 4 two-byte characters
  EXPECT_FALSE(accepts(*g, "\"\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\""));
  EXPECT_TRUE(accepts(*g, R"("\"\n\u001f\"")"));
  EXPECT_FALSE(accepts(*g, R"("\"\n\u001f\"a")"));
  // format and an unanchored pattern with lengths; impossible lengths are an error.
  auto date = schema_grammar(R"({"type":"string","format":"date","minLength":10,"maxLength":10})");
  EXPECT_TRUE(accepts(*date, R"("2024-02-28")"));
  auto x = schema_grammar(R"({"type":"string","pattern":"x","maxLength":3})");
  EXPECT_TRUE(accepts(*x, R"("abx")"));
  EXPECT_FALSE(accepts(*x, R"("abcx")"));
  EXPECT_FALSE(accepts(*x, R"("ab")"));
  std::string err = "no error";
  try {
    schema_grammar(R"({"type":"string","format":"date","maxLength":9})");
  } catch (const Error& e) {
    err = e.what();
  }
  EXPECT_NE(err.find("matches no output"), std::string::npos) << err;
}

TEST(JsonSchema, JsonObjectModeAcceptsNestedObjectsOnly) {
  auto g = compile(json_object_grammar());
  EXPECT_TRUE(accepts(*g, R"({"a": [1, 2.5e3, {"b": null}], "c": "x\"y\n\u001fé", "d": {}})"));
  EXPECT_TRUE(accepts(*g, "{}"));
  EXPECT_FALSE(accepts(*g, "[1]"));
  EXPECT_FALSE(accepts(*g, R"({"a": 01})"));
  EXPECT_FALSE(accepts(*g, R"({"a": 1,})"));
  std::mt19937_64 rng(9);
  for (int i = 0; i < 200; ++i) {
    const std::string s = random_output(*g, rng, 0.4);
    json v;
    ASSERT_NO_THROW(v = json::parse(s)) << s;
    EXPECT_TRUE(v.is_object()) << s;
  }
}

}  // namespace
}  // namespace pypto::structured::test
