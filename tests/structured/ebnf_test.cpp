// The EBNF grammar syntax of structured_outputs.grammar.
#include <gtest/gtest.h>

#include "core/error.h"
#include "structured/ebnf.h"
#include "structured_test_util.h"

namespace pypto::structured::test {
namespace {

TEST(Ebnf, ArithmeticGrammar) {
  auto g = compile(parse_ebnf(R"G(
    # sums of products of small numbers
    root ::= expr
    expr ::= term ("+" term)*
    term ::= factor ("*" factor)*
    factor ::= [0-9]{1,3} | "(" expr ")"
  )G"));
  EXPECT_TRUE(accepts(*g, "1+2*3"));
  EXPECT_TRUE(accepts(*g, "(1+2)*(3+(4))"));
  EXPECT_FALSE(accepts(*g, "1+"));
  EXPECT_FALSE(accepts(*g, "1234"));
  EXPECT_FALSE(accepts(*g, "(1"));
  EXPECT_TRUE(accepts_prefix(*g, "(1"));
}

TEST(Ebnf, LiteralsWithEscapesAndClasses) {
  auto g = compile(parse_ebnf("root ::= \"say \\\"hi\\\"\\n\" [^a-z]? \"\\u00e9\""));
  EXPECT_TRUE(accepts(*g, "say \"hi\"\n\xC3\xA9"));
  EXPECT_TRUE(accepts(*g, "say \"hi\"\nX\xC3\xA9"));
  EXPECT_FALSE(accepts(*g, "say \"hi\"\nx\xC3\xA9"));
}

std::string error_of(const char* text) {
  try {
    parse_ebnf(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Ebnf, ErrorsNameTheLine) {
  EXPECT_EQ(error_of("start ::= \"a\""), "grammar: no rule named 'root'");
  EXPECT_EQ(error_of("root ::= a\n"), "grammar: rule 'a' is used but never defined");
  EXPECT_EQ(error_of("root ::= \"a\"\nb ::= \"x"), "grammar line 2: unterminated string");
  EXPECT_EQ(error_of("root ::= \"a\" )"), "grammar line 1: expected a rule name, got ')'");
  EXPECT_EQ(error_of("root ::= \"a\"\nroot ::= \"b\""), "grammar line 2: rule 'root' is defined twice");
}

}  // namespace
}  // namespace pypto::structured::test
