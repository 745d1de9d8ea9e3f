#include "tokenizer/jinja_lexer.h"

#include <cstring>
#include <functional>

#include "core/error.h"
#include "tokenizer/jinja_text.h"

namespace pypto::jinja {

const char* tok_name(Tok t) {
  switch (t) {
    case Tok::Text: return "Text";
    case Tok::Number: return "NumericLiteral";
    case Tok::String: return "StringLiteral";
    case Tok::Identifier: return "Identifier";
    case Tok::Equals: return "Equals";
    case Tok::OpenParen: return "OpenParen";
    case Tok::CloseParen: return "CloseParen";
    case Tok::OpenStatement: return "OpenStatement";
    case Tok::CloseStatement: return "CloseStatement";
    case Tok::OpenExpression: return "OpenExpression";
    case Tok::CloseExpression: return "CloseExpression";
    case Tok::OpenSquare: return "OpenSquareBracket";
    case Tok::CloseSquare: return "CloseSquareBracket";
    case Tok::OpenCurly: return "OpenCurlyBracket";
    case Tok::CloseCurly: return "CloseCurlyBracket";
    case Tok::Comma: return "Comma";
    case Tok::Dot: return "Dot";
    case Tok::Colon: return "Colon";
    case Tok::Pipe: return "Pipe";
    case Tok::Additive: return "AdditiveBinaryOperator";
    case Tok::Multiplicative: return "MultiplicativeBinaryOperator";
    case Tok::Exponent: return "ExponentiationBinaryOperator";
    case Tok::Comparison: return "ComparisonBinaryOperator";
    case Tok::Unary: return "UnaryOperator";
    case Tok::Comment: return "Comment";
  }
  return "?";
}

namespace {

// Source text with the original line of every byte, so errors point into the user's template
// even after the whitespace rewrites below removed newlines.
struct Src {
  std::string s;
  std::vector<int> line;
  void push(char c, int l) {
    s += c;
    line.push_back(l);
  }
};

bool starts_with_at(const std::string& s, size_t i, const char* p) {
  return s.compare(i, std::strlen(p), p) == 0;
}

bool is_line_terminator_end(const std::string& s, size_t i) {  // does a terminator end at i?
  if (i == 0) return false;
  char c = s[i - 1];
  if (c == '\n' || c == '\r') return true;
  // U+2028 / U+2029 (E2 80 A8 / E2 80 A9) are line terminators for JS's multiline ^.
  return i >= 3 && s.compare(i - 3, 2, "\xE2\x80") == 0 && (s[i - 1] == '\xA8' || s[i - 1] == '\xA9');
}

// lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1".
Src lstrip_blocks(const Src& in) {
  Src out;
  const std::string& s = in.s;
  for (size_t i = 0; i < s.size();) {
    if (i == 0 || is_line_terminator_end(s, i)) {
      size_t j = i;
      while (j < s.size() && (s[j] == ' ' || s[j] == '\t')) ++j;
      if (j + 1 < s.size() && s[j] == '{' && (s[j + 1] == '#' || s[j + 1] == '%' || s[j + 1] == '-')) {
        out.push(s[j], in.line[j]);
        out.push(s[j + 1], in.line[j + 1]);
        i = j + 2;
        continue;
      }
    }
    out.push(s[i], in.line[i]);
    ++i;
  }
  return out;
}

// trim_blocks: /([#%-]})\n/g -> "$1".
Src trim_blocks(const Src& in) {
  Src out;
  const std::string& s = in.s;
  for (size_t i = 0; i < s.size();) {
    if (i + 2 < s.size() && (s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' && s[i + 2] == '\n') {
      out.push(s[i], in.line[i]);
      out.push(s[i + 1], in.line[i + 1]);
      i += 3;
      continue;
    }
    out.push(s[i], in.line[i]);
    ++i;
  }
  return out;
}

size_t skip_js_space(const std::string& s, size_t i) {
  while (i < s.size()) {
    size_t j = i;
    if (!is_js_space(next_code_point(s, j))) break;
    i = j;
  }
  return i;
}

// If a generation tag starts at q ({%-? \s* (end)?generation \s* -?%}), returns its end and
// whether it had the - markers.
bool match_generation_tag(const std::string& s, size_t q, size_t& end, bool& lstrip, bool& rstrip) {
  if (!starts_with_at(s, q, "{%")) return false;
  size_t i = q + 2;
  lstrip = i < s.size() && s[i] == '-';
  if (lstrip) ++i;
  i = skip_js_space(s, i);
  if (starts_with_at(s, i, "end")) i += 3;
  if (!starts_with_at(s, i, "generation")) return false;
  i = skip_js_space(s, i + 10);
  rstrip = i < s.size() && s[i] == '-';
  if (rstrip) ++i;
  if (!starts_with_at(s, i, "%}")) return false;
  end = i + 2;
  return true;
}

// Removes transformers' {% generation %} / {% endgeneration %} tags together with the
// whitespace around them that their - markers ask to strip (the oracle's regex
// /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs).
Src strip_generation_tags(const Src& in) {
  const std::string& s = in.s;
  if (s.find("generation") == std::string::npos) return in;
  Src out;
  size_t copied = 0;  // everything before this has been emitted
  for (size_t q = s.find("{%"); q != std::string::npos; q = s.find("{%", q + 1)) {
    if (q < copied) continue;
    size_t end;
    bool lstrip, rstrip;
    if (!match_generation_tag(s, q, end, lstrip, rstrip)) continue;
    // Leading whitespace run (greedy from the leftmost position not yet consumed).
    size_t ws_begin = q;
    {
      // Find the earliest x >= copied with s[x, q) all whitespace.
      size_t x = copied;
      while (x < q) {
        size_t j = skip_js_space(s, x);
        if (j >= q) break;
        // s[j] is not whitespace; restart after it.
        next_code_point(s, j);
        x = j;
      }
      ws_begin = x;
    }
    size_t after_end = skip_js_space(s, end);
    for (size_t i = copied; i < ws_begin; ++i) out.push(s[i], in.line[i]);
    if (!lstrip)
      for (size_t i = ws_begin; i < q; ++i) out.push(s[i], in.line[i]);
    if (!rstrip)
      for (size_t i = end; i < after_end; ++i) out.push(s[i], in.line[i]);
    copied = after_end;
    q = after_end == 0 ? 0 : after_end - 1;
  }
  for (size_t i = copied; i < s.size(); ++i) out.push(s[i], in.line[i]);
  return out;
}

Src preprocess(const std::string& source) {
  Src src;
  src.s = source;
  src.line.resize(source.size());
  int line = 1;
  for (size_t i = 0; i < source.size(); ++i) {
    src.line[i] = line;
    if (source[i] == '\n') ++line;
  }
  // A single trailing newline is dropped (Jinja's keep_trailing_newline=False).
  if (!src.s.empty() && src.s.back() == '\n') {
    src.s.pop_back();
    src.line.pop_back();
  }
  return strip_generation_tags(trim_blocks(lstrip_blocks(src)));
}

bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(const std::string& source) : src_(preprocess(source)), s_(src_.s) {}

  std::vector<Token> run() {
    while (pos_ < s_.size()) step();
    return std::move(tokens_);
  }

 private:
  Src src_;
  const std::string& s_;
  size_t pos_ = 0;
  int curly_depth_ = 0;
  std::vector<Token> tokens_;

  int line_at(size_t i) const {
    if (src_.line.empty()) return 1;
    return src_.line[i < src_.line.size() ? i : src_.line.size() - 1];
  }
  [[noreturn]] void error(const std::string& msg) const {
    fail("chat template line ", line_at(pos_), ": ", msg);
  }
  char at(size_t i) const { return i < s_.size() ? s_[i] : '\0'; }
  bool last_is(Tok t) const { return !tokens_.empty() && tokens_.back().type == t; }
  void push(Tok t, std::string v, size_t start) { tokens_.push_back({t, std::move(v), line_at(start)}); }

  // The oracle's consumeWhile: handles backslash escapes and rejects running off the end.
  std::string consume_while(const std::function<bool(char)>& pred) {
    std::string out;
    while (pos_ < s_.size() && pred(s_[pos_])) {
      if (s_[pos_] == '\\') {
        ++pos_;
        if (pos_ >= s_.size()) error("Unexpected end of input");
        char e = s_[pos_++];
        if (e == 'x' || e == 'u') {
          size_t n = e == 'x' ? 2 : 4;
          std::string hex = s_.substr(pos_, n);
          if (hex.size() != n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            error(str_cat("Invalid hexadecimal escape sequence: \\", e, hex));
          char32_t cp = static_cast<char32_t>(std::stoul(hex, nullptr, 16));
          pos_ += n;
          // A \uD83D\uDE00 pair spells one supplementary character.
          if (cp >= 0xD800 && cp <= 0xDBFF && at(pos_) == '\\' && at(pos_ + 1) == 'u') {
            std::string lo = s_.substr(pos_ + 2, 4);
            if (lo.size() == 4 && lo.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos) {
              char32_t low = static_cast<char32_t>(std::stoul(lo, nullptr, 16));
              if (low >= 0xDC00 && low <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                pos_ += 6;
              }
            }
          }
          append_utf8(out, cp);
          continue;
        }
        switch (e) {
          case 'n': out += '\n'; break;
          case 't': out += '\t'; break;
          case 'r': out += '\r'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'v': out += '\v'; break;
          case '\'': out += '\''; break;
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          default: error(str_cat("Unexpected escaped character: ", e));
        }
        continue;
      }
      out += s_[pos_++];
      if (pos_ >= s_.size()) error("Unexpected end of input");
    }
    return out;
  }

  void consume_whitespace() {
    while (pos_ < s_.size()) {
      size_t j = pos_;
      if (!is_js_space(next_code_point(s_, j))) break;
      pos_ = j;
      if (pos_ >= s_.size()) error("Unexpected end of input");
    }
  }

  void strip_trailing_whitespace() {
    if (last_is(Tok::Text)) {
      tokens_.back().value = js_trim_end(tokens_.back().value);
      if (tokens_.back().value.empty()) tokens_.pop_back();
    }
  }

  void skip_leading_whitespace() { pos_ = skip_js_space(s_, pos_); }

  bool at_tag_open(size_t i) const {
    return at(i) == '{' && (at(i + 1) == '%' || at(i + 1) == '{' || at(i + 1) == '#');
  }

  void step() {
    const size_t start = pos_;
    if (tokens_.empty() || last_is(Tok::CloseStatement) || last_is(Tok::CloseExpression) || last_is(Tok::Comment)) {
      size_t e = pos_;
      while (e < s_.size() && !at_tag_open(e)) ++e;
      if (e > pos_) {
        push(Tok::Text, s_.substr(pos_, e - pos_), start);
        pos_ = e;
        return;
      }
    }

    if (at(pos_) == '{' && at(pos_ + 1) == '#') {
      pos_ += 2;
      const bool strip_before = at(pos_) == '-';
      if (strip_before) ++pos_;
      std::string comment;
      while (at(pos_) != '#' || at(pos_ + 1) != '}') {
        if (pos_ + 2 >= s_.size()) error("Missing end of comment tag");
        comment += s_[pos_++];
      }
      const bool strip_after = !comment.empty() && comment.back() == '-';
      if (strip_after) comment.pop_back();
      if (strip_before) strip_trailing_whitespace();
      push(Tok::Comment, comment, start);
      pos_ += 2;
      if (strip_after) skip_leading_whitespace();
      return;
    }

    if (s_.compare(pos_, 3, "{%-") == 0) {
      strip_trailing_whitespace();
      push(Tok::OpenStatement, "{%", start);
      pos_ += 3;
      return;
    }
    if (s_.compare(pos_, 3, "{{-") == 0) {
      strip_trailing_whitespace();
      push(Tok::OpenExpression, "{{", start);
      curly_depth_ = 0;
      pos_ += 3;
      return;
    }

    consume_whitespace();

    if (s_.compare(pos_, 3, "-%}") == 0) {
      push(Tok::CloseStatement, "%}", pos_);
      pos_ += 3;
      skip_leading_whitespace();
      return;
    }
    if (s_.compare(pos_, 3, "-}}") == 0) {
      push(Tok::CloseExpression, "}}", pos_);
      pos_ += 3;
      skip_leading_whitespace();
      return;
    }

    const size_t tok_start = pos_;
    const char c = at(pos_);
    if (c == '-' || c == '+') {
      if (tokens_.empty() || last_is(Tok::Text)) error(str_cat("Unexpected character: ", c));
      const Tok last = tokens_.back().type;
      const bool binary = last == Tok::Identifier || last == Tok::Number || last == Tok::String ||
                          last == Tok::CloseParen || last == Tok::CloseSquare;
      if (!binary) {
        ++pos_;
        std::string num = consume_while(is_digit);
        if (!num.empty() && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
          ++pos_;
          num += "." + consume_while(is_digit);
        }
        if (num.empty())
          push(Tok::Unary, std::string(1, c), tok_start);
        else
          push(Tok::Number, std::string(1, c) + num, tok_start);
        return;
      }
    }

    static const struct {
      const char* seq;
      Tok type;
    } kTable[] = {
        {"{%", Tok::OpenStatement}, {"%}", Tok::CloseStatement}, {"{{", Tok::OpenExpression},
        {"}}", Tok::CloseExpression}, {"(", Tok::OpenParen},     {")", Tok::CloseParen},
        {"{", Tok::OpenCurly},        {"}", Tok::CloseCurly},    {"[", Tok::OpenSquare},
        {"]", Tok::CloseSquare},      {",", Tok::Comma},         {".", Tok::Dot},
        {":", Tok::Colon},            {"|", Tok::Pipe},          {"<=", Tok::Comparison},
        {">=", Tok::Comparison},      {"==", Tok::Comparison},   {"!=", Tok::Comparison},
        {"<", Tok::Comparison},       {">", Tok::Comparison},    {"+", Tok::Additive},
        {"-", Tok::Additive},         {"~", Tok::Additive},      {"**", Tok::Exponent},
        {"*", Tok::Multiplicative},   {"//", Tok::Multiplicative}, {"/", Tok::Multiplicative},
        {"%", Tok::Multiplicative},   {"=", Tok::Equals},
    };
    for (const auto& entry : kTable) {
      if (entry.type == Tok::CloseExpression && curly_depth_ > 0) continue;  // }} inside {...}
      if (starts_with_at(s_, pos_, entry.seq)) {
        push(entry.type, entry.seq, tok_start);
        if (entry.type == Tok::OpenExpression) curly_depth_ = 0;
        if (entry.type == Tok::OpenCurly) ++curly_depth_;
        if (entry.type == Tok::CloseCurly) --curly_depth_;
        pos_ += std::strlen(entry.seq);
        return;
      }
    }

    if (c == '\'' || c == '"') {
      ++pos_;
      std::string str = consume_while([c](char ch) { return ch != c; });
      push(Tok::String, std::move(str), tok_start);
      ++pos_;
      return;
    }
    if (is_digit(c)) {
      std::string num = consume_while(is_digit);
      if (!last_is(Tok::Dot) && at(pos_) == '.' && is_digit(at(pos_ + 1))) {
        ++pos_;
        num += '.';
        num += consume_while(is_digit);
      }
      push(Tok::Number, std::move(num), tok_start);
      return;
    }
    if (is_word(c)) {
      push(Tok::Identifier, consume_while(is_word), tok_start);
      return;
    }
    size_t j = pos_;
    std::string ch;
    append_utf8(ch, next_code_point(s_, j));
    error("Unexpected character: " + ch);
  }
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(source).run(); }

}  // namespace pypto::jinja
