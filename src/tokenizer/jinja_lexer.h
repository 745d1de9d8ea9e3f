#pragma once
// Lexer for the chat-template Jinja subset.
//
// Whitespace handling is exactly @huggingface/jinja's (the oracle): before tokenizing, one
// trailing newline is dropped, lstrip_blocks and trim_blocks are applied as text rewrites over
// the whole source (they are on by default there), and the transformers-only
// {% generation %} tags are removed. `-` markers then trim neighbouring text tokens.
#include <string>
#include <vector>

namespace pypto::jinja {

enum class Tok {
  Text,
  Number,
  String,
  Identifier,
  Equals,
  OpenParen,
  CloseParen,
  OpenStatement,
  CloseStatement,
  OpenExpression,
  CloseExpression,
  OpenSquare,
  CloseSquare,
  OpenCurly,
  CloseCurly,
  Comma,
  Dot,
  Colon,
  Pipe,
  Additive,        // + - ~
  Multiplicative,  // * / // %
  Exponent,        // **
  Comparison,      // < > <= >= == !=
  Unary,           // + - (not followed by a number)
  Comment,
};

const char* tok_name(Tok t);

struct Token {
  Tok type;
  std::string value;
  int line;  // 1-based line in the original template source
};

// Throws pypto::Error("chat template line N: ...") on malformed input.
std::vector<Token> tokenize(const std::string& source);

}  // namespace pypto::jinja
