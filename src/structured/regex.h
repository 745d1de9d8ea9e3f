#pragma once
// Regular expressions (the ECMAScript subset JSON Schema's `pattern` and vLLM's `regex` use) to
// grammar expressions.
//
// Supported: literals, `.`, classes `[...]`/`[^...]` with ranges, `\d \D \w \W \s \S`, escapes
// (`\n \t \r \f \v \0 \xHH \uHHHH` and escaped punctuation), groups `(...)`, `(?:...)`,
// `(?<name>...)`, alternation, quantifiers `* + ? {n} {n,} {n,m}` (lazy `?` suffix accepted; it
// does not change which strings match), `^` at the start and `$` at the end of the whole
// pattern or of a top-level alternative. Anything else (backreferences, lookaround, `\b`,
// possessive quantifiers, anchors elsewhere) is an Error naming it.
#include <string_view>

#include "structured/grammar.h"

namespace pypto::structured {

// Limits (docs/api.md, "Input limits"); past one the pattern is an Error naming it.
// Groups nested inside each other (the parser recurses once per level).
inline constexpr int kMaxRegexNesting = 64;
// Bytes of one pattern (each character becomes several expression nodes).
inline constexpr int kMaxRegexBytes = 65'536;
// The largest count in a {n}, {n,} or {n,m} quantifier.
inline constexpr int kMaxRegexRepeat = 100'000;

enum class RegexMode {
  FullMatch,     // the whole text must match (vLLM `regex`, our string formats)
  Search,        // JSON Schema `pattern`: a match anywhere, unless anchored with ^ / $
};

// `json_string`: the expression matches the *JSON-escaped* spelling of the matching strings
// (what goes between the quotes): `"` as `\"`, `\` as `\\`, control characters as \n, \t, \r,
// \b, \f or \u00XX. Throws Error naming the position and the problem.
ExprPtr compile_regex(std::string_view pattern, RegexMode mode, bool json_string);

// One JSON string character (escaped form) from the code point ranges, for json_schema.cpp.
ExprPtr json_string_chars(const std::vector<std::pair<uint32_t, uint32_t>>& ranges);

}  // namespace pypto::structured
