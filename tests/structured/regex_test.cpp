// Regexes against std::regex (ECMAScript grammar) as the reference: random strings over a small
// alphabet and random outputs of our automaton must get the same verdict from both.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <regex>

#include "core/error.h"
#include "structured/regex.h"
#include "structured_test_util.h"

namespace pypto::structured::test {
namespace {

Grammar regex_grammar(const std::string& pattern, RegexMode mode) {
  Grammar g;
  g.root = compile_regex(pattern, mode, false);
  return g;
}

const char* kPatterns[] = {
    "abc", "a|b|cd", "a*b+c?", "(ab)*c", "[a-c]{2,4}", "[^abc]x", "\\d{3}-\\d{2}", "\\w+@\\w+\\.com",
    "(a|b)*abb", "x{0,3}y{2}", "[a-f0-9]+", "(?:ab|cd)+e", "a.c", "\\s*\\S+", "[-a]+", "(0|[1-9][0-9]*)(\\.[0-9]+)?",
    "[\\d.]+", "a{2,}", "(a|ab)(c|bcd)(d*)", "[A-Z][a-z]*( [A-Z][a-z]*)*",
};

std::string random_string(std::mt19937_64& rng, const std::string& alphabet, size_t max_len) {
  std::uniform_int_distribution<size_t> len(0, max_len), pick(0, alphabet.size() - 1);
  std::string s;
  for (size_t n = len(rng); n > 0; --n) s += alphabet[pick(rng)];
  return s;
}

TEST(Regex, FullMatchAgreesWithStdRegex) {
  std::mt19937_64 rng(7);
  const std::string alphabet = "abcdexyz019.-@ AZ_\n";
  for (const char* p : kPatterns) {
    auto g = compile(regex_grammar(p, RegexMode::FullMatch));
    const std::regex re(p, std::regex::ECMAScript);
    for (int i = 0; i < 400; ++i) {
      const std::string s = random_string(rng, alphabet, 8);
      ASSERT_EQ(accepts(*g, s), std::regex_match(s, re)) << "pattern " << p << " on '" << s << "'";
    }
    for (int i = 0; i < 100; ++i) {
      const std::string s = random_output(*g, rng);
      // std::regex works on bytes, ours on UTF-8 characters: compare on ASCII without NUL.
      if (std::any_of(s.begin(), s.end(), [](char c) { return c == 0 || uint8_t(c) >= 0x80; })) continue;
      ASSERT_TRUE(std::regex_match(s, re)) << "pattern " << p << " generated '" << s << "'";
    }
  }
}

TEST(Regex, SearchModeAgreesWithRegexSearch) {
  std::mt19937_64 rng(8);
  const std::string alphabet = "abcxy01";
  for (const char* p : {"ab", "^ab", "ab$", "^a+b$", "^a|b$", "x[01]y"}) {
    auto g = compile(regex_grammar(p, RegexMode::Search));
    const std::regex re(p, std::regex::ECMAScript);
    for (int i = 0; i < 500; ++i) {
      const std::string s = random_string(rng, alphabet, 7);
      ASSERT_EQ(accepts(*g, s), std::regex_search(s, re)) << "pattern " << p << " on '" << s << "'";
    }
  }
}

TEST(Regex, UnicodeClassesAreWholeUtf8Characters) {
  auto g = compile(regex_grammar("[à-ÿ]+|é{2}", RegexMode::FullMatch));
  EXPECT_TRUE(accepts(*g, "àÿ"));
  EXPECT_TRUE(accepts(*g, "éé"));
  EXPECT_FALSE(accepts(*g, "a"));
  EXPECT_TRUE(accepts_prefix(*g, "\xC3"));   // first byte of à..ÿ
  EXPECT_FALSE(accepts_prefix(*g, "\xC4"));  // Ā and above
  auto dot = compile(regex_grammar(".", RegexMode::FullMatch));
  EXPECT_TRUE(accepts(*dot, "\xF0\x9F\x98\x80"));   // U+1F600
  EXPECT_FALSE(accepts(*dot, "\xED\xA0\x80"));      // a surrogate is not a character
  EXPECT_FALSE(accepts(*dot, "\xC0\xAF"));          // overlong
  EXPECT_FALSE(accepts(*dot, "\n"));
}

TEST(Regex, JsonStringModeEscapes) {
  Grammar g;
  g.root = compile_regex("a\"\\\\b\\n", RegexMode::FullMatch, true);  // a " \ b newline
  auto c = compile(g);
  EXPECT_TRUE(accepts(*c, "a\\\"\\\\b\\n"));
  EXPECT_FALSE(accepts(*c, "a\"\\b\n"));
}

TEST(Regex, UnsupportedFeaturesAreErrorsNamingThem) {
  auto message = [](const char* p) {
    try {
      compile_regex(p, RegexMode::FullMatch, false);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("(a)\\1").find("\\1"), std::string::npos);
  EXPECT_NE(message("a(?=b)").find("lookaround"), std::string::npos);
  EXPECT_NE(message("\\bword").find("word boundaries"), std::string::npos);
  EXPECT_NE(message("a++").find("possessive"), std::string::npos);
  EXPECT_NE(message("(ab").find("missing ')'"), std::string::npos);
  EXPECT_NE(message("a{3,1}").find("max < min"), std::string::npos);
  EXPECT_NE(message("a^b").find("'^'"), std::string::npos);
}

}  // namespace
}  // namespace pypto::structured::test
