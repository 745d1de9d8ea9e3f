#pragma once
// The grammar text accepted by `structured_outputs.grammar` (documented in docs/api.md): a
// GBNF-like EBNF over the output's characters.
//
//   root   ::= "{" ws pair ("," ws pair)* ws "}"     # the rule named root is the output
//   pair   ::= key ws ":" ws [0-9]+
//   key    ::= "\"" [a-z_]{1,16} "\""
//   ws     ::= [ \n]*
//
// Rules are `name ::= alternatives`, a rule may continue on the next lines (a new rule starts
// with `name ::=`); alternatives are separated by `|`; items are "string" literals (escapes
// \n \t \r \\ \" \xHH \uHHHH), [character classes] as in regexes, rule names, ( groups ), each
// optionally followed by * + ? or {m}, {m,}, {m,n}; `#` starts a comment. Errors name the line.
#include <string_view>

#include "structured/grammar.h"

namespace pypto::structured {

// Limits (docs/api.md, "Input limits"); past one the grammar is an Error naming it.
// Bytes of grammar text (each literal byte becomes an expression node).
inline constexpr int kMaxEbnfBytes = 131'072;
// ( groups ) nested inside each other (the parser recurses once per level).
inline constexpr int kMaxEbnfNesting = 64;
// The largest count in a {m}, {m,} or {m,n} repetition.
inline constexpr int kMaxEbnfRepeat = 100'000;
// Rules in one grammar.
inline constexpr int kMaxEbnfRules = 4096;

Grammar parse_ebnf(std::string_view text);

}  // namespace pypto::structured
