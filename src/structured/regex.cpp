#include "structured/regex.h"

#include <algorithm>
#include <string>

#include "core/error.h"

namespace pypto::structured {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (auto [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) out.back().second = std::max(out.back().second, hi);
    else out.push_back({lo, hi});
  }
  return out;
}

Ranges complement(const Ranges& in) {
  Ranges r = normalize(in), out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

const Ranges kDigit = {{'0', '9'}};
const Ranges kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
const Ranges kSpace = {{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                       {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};

std::u32string decode_utf8(std::string_view s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const uint8_t c = uint8_t(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + size_t(n) > s.size()) fail("the regex is not valid UTF-8 at byte ", i);
    uint32_t cp = n == 1 ? c : c & (0x7F >> n);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (uint8_t(s[i + size_t(k)]) & 0x3F);
    out.push_back(cp);
    i += size_t(n);
  }
  return out;
}

class Parser {
 public:
  Parser(std::string_view src, bool json) : src_(src), p_(decode_utf8(src)), json_(json) {}

  ExprPtr parse(RegexMode mode) {
    std::vector<ExprPtr> branches;
    for (;;) {
      bool start_anchor = false, end_anchor = false;
      if (peek('^')) {
        ++i_;
        start_anchor = true;
      }
      ExprPtr body = concat(/*top=*/true, &end_anchor);
      if (mode == RegexMode::Search) {
        // An unanchored side may have anything around the match.
        std::vector<ExprPtr> parts;
        if (!start_anchor) parts.push_back(repeat(chars({{0, 0x10FFFF}}), 0, -1));
        parts.push_back(body);
        if (!end_anchor) parts.push_back(repeat(chars({{0, 0x10FFFF}}), 0, -1));
        body = seq(std::move(parts));
      }
      branches.push_back(body);
      if (at_end()) break;
      if (peek('|')) {
        ++i_;
        continue;
      }
      error("unbalanced ')'");
    }
    return alt(std::move(branches));
  }

 private:
  bool at_end() const { return i_ >= p_.size(); }
  bool peek(char32_t c) const { return i_ < p_.size() && p_[i_] == c; }
  [[noreturn]] void error(const std::string& what) const {
    // A long pattern is named by its start: the message stays small whatever the input.
    size_t cut = src_.size() > 120 ? 100 : src_.size();
    while (cut < src_.size() && cut > 0 && (uint8_t(src_[cut]) & 0xC0) == 0x80) --cut;  // whole characters
    const std::string_view shown = src_.substr(0, cut);
    fail("regex '", shown, src_.size() > 120 ? "...'" : "'", ": ", what, " at character ", i_);
  }

  ExprPtr chars(const Ranges& r) const { return json_ ? json_string_chars(r) : code_points(r); }

  ExprPtr alternation() {
    std::vector<ExprPtr> branches = {concat(false, nullptr)};
    while (peek('|')) {
      ++i_;
      branches.push_back(concat(false, nullptr));
    }
    return alt(std::move(branches));
  }

  // Atoms with quantifiers up to '|', ')' or the end. At the top level a final '$' anchors.
  ExprPtr concat(bool top, bool* end_anchor) {
    std::vector<ExprPtr> items;
    while (!at_end() && !peek('|') && !peek(')')) {
      if (peek('$')) {
        ++i_;
        if (top && (at_end() || peek('|'))) {
          *end_anchor = true;
          break;
        }
        error("'$' is supported only at the end of the pattern");
      }
      if (peek('^')) error("'^' is supported only at the start of the pattern");
      ExprPtr a = atom();
      items.push_back(quantified(a));
    }
    return seq(std::move(items));
  }

  int number() {
    if (at_end() || p_[i_] < '0' || p_[i_] > '9') error("expected a number in {}");
    int v = 0;
    while (!at_end() && p_[i_] >= '0' && p_[i_] <= '9') {
      v = v * 10 + int(p_[i_] - '0');
      if (v > kMaxRegexRepeat)
        error(str_cat("a repetition count exceeds the limit of ", kMaxRegexRepeat, " (kMaxRegexRepeat)"));
      ++i_;
    }
    return v;
  }

  ExprPtr quantified(ExprPtr a) {
    if (at_end()) return a;
    int lo = -1, hi = -1;
    const char32_t c = p_[i_];
    if (c == '*') { lo = 0; hi = -1; ++i_; }
    else if (c == '+') { lo = 1; hi = -1; ++i_; }
    else if (c == '?') { lo = 0; hi = 1; ++i_; }
    else if (c == '{') {
      ++i_;
      lo = number();
      hi = lo;
      if (peek(',')) {
        ++i_;
        hi = peek('}') ? -1 : number();
      }
      if (!peek('}')) error("expected '}'");
      ++i_;
      if (hi >= 0 && hi < lo) error("repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "} has max < min");
    } else {
      return a;
    }
    if (peek('?')) ++i_;  // lazy: same language
    else if (peek('+')) error("possessive quantifiers are not supported");
    if (peek('*') || peek('+') || peek('{')) error("nothing to repeat");
    return repeat(a, lo, hi);
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (at_end()) error("truncated hex escape");
      const char32_t c = p_[i_++];
      int d = c >= '0' && c <= '9' ? int(c - '0') : c >= 'a' && c <= 'f' ? int(c - 'a' + 10)
              : c >= 'A' && c <= 'F' ? int(c - 'A' + 10) : -1;
      if (d < 0) error("bad hex digit in escape");
      v = v * 16 + uint32_t(d);
    }
    return v;
  }

  // After a backslash: the class it stands for.
  Ranges escape() {
    if (at_end()) error("trailing backslash");
    const char32_t c = p_[i_++];
    switch (c) {
      case 'd': return kDigit;
      case 'D': return complement(kDigit);
      case 'w': return kWord;
      case 'W': return complement(kWord);
      case 's': return kSpace;
      case 'S': return complement(kSpace);
      case 'n': return {{'\n', '\n'}};
      case 't': return {{'\t', '\t'}};
      case 'r': return {{'\r', '\r'}};
      case 'f': return {{'\f', '\f'}};
      case 'v': return {{'\v', '\v'}};
      case '0': return {{0, 0}};
      case 'x': { const uint32_t v = hex(2); return {{v, v}}; }
      case 'u': { const uint32_t v = hex(4); return {{v, v}}; }
      default: break;
    }
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '1' && c <= '9'))
      error(std::string("the escape \\") + char(c) + " is not supported");
    return {{uint32_t(c), uint32_t(c)}};
  }

  ExprPtr atom() {
    const char32_t c = p_[i_];
    if (c == '(') {
      ++i_;
      if (peek('?')) {
        ++i_;
        if (peek(':')) ++i_;
        else if (peek('<') && i_ + 1 < p_.size() && p_[i_ + 1] != '=' && p_[i_ + 1] != '!') {
          while (!at_end() && !peek('>')) ++i_;
          if (at_end()) error("unterminated group name");
          ++i_;
        } else {
          error("lookaround and other (?...) groups are not supported");
        }
      }
      if (++depth_ > kMaxRegexNesting)
        error(str_cat("groups nest deeper than the limit of ", kMaxRegexNesting, " (kMaxRegexNesting)"));
      ExprPtr inner = alternation();
      --depth_;
      if (!peek(')')) error("missing ')'");
      ++i_;
      return inner;
    }
    if (c == '[') return chars(char_class());
    if (c == '.') {
      ++i_;
      return chars(complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}));
    }
    if (c == '\\') {
      ++i_;
      if (peek('b') || peek('B')) error("word boundaries (\\b, \\B) are not supported");
      return chars(escape());
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') error("nothing to repeat");
    ++i_;
    return chars({{uint32_t(c), uint32_t(c)}});
  }

  Ranges char_class() {
    ++i_;  // '['
    bool negate = false;
    if (peek('^')) {
      negate = true;
      ++i_;
    }
    Ranges r;
    bool first = true;
    while (!at_end() && (!peek(']') || first)) {
      first = false;
      Ranges item;
      uint32_t single = 0;
      bool is_single = false;
      if (peek('\\')) {
        ++i_;
        if (peek('b')) {
          ++i_;
          item = {{8, 8}};  // backspace inside a class
        } else {
          item = escape();
        }
      } else {
        item = {{uint32_t(p_[i_]), uint32_t(p_[i_])}};
        ++i_;
      }
      if (item.size() == 1 && item[0].first == item[0].second) {
        is_single = true;
        single = item[0].first;
      }
      if (is_single && peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        uint32_t hi;
        if (peek('\\')) {
          ++i_;
          Ranges h = escape();
          if (h.size() != 1 || h[0].first != h[0].second) error("bad range end in a class");
          hi = h[0].first;
        } else {
          hi = uint32_t(p_[i_++]);
        }
        if (hi < single) error("range out of order in a class");
        item = {{single, hi}};
      }
      r.insert(r.end(), item.begin(), item.end());
    }
    if (!peek(']')) error("missing ']'");
    ++i_;
    r = normalize(r);
    return negate ? complement(r) : r;
  }

  std::string_view src_;
  std::u32string p_;
  size_t i_ = 0;
  int depth_ = 0;  // groups open
  bool json_;
};

}  // namespace

ExprPtr json_string_chars(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  // Plain characters are everything but '"', '\' and controls; those are written escaped.
  Ranges plain, special;
  for (auto [lo, hi] : normalize(ranges)) {
    for (uint32_t c : {uint32_t('"'), uint32_t('\\')})
      if (lo <= c && c <= hi) special.push_back({c, c});
    for (auto [a, b] : complement({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}})) {
      const uint32_t l = std::max(lo, a), h = std::min(hi, b);
      if (l <= h) plain.push_back({l, h});
    }
    for (uint32_t c = lo; c <= std::min<uint32_t>(hi, 0x1F); ++c) special.push_back({c, c});
  }
  std::vector<ExprPtr> alts;
  if (!plain.empty()) alts.push_back(code_points(plain));
  // All 32 controls: one compact \u00XX alternative instead of 32 literals (their \n, \t...
  // short forms are kept too, so the model may write either).
  bool all_controls = true;
  for (uint32_t c = 0; c < 0x20 && all_controls; ++c)
    all_controls = std::find(special.begin(), special.end(), std::pair<uint32_t, uint32_t>{c, c}) != special.end();
  if (all_controls) {
    ByteSet hex;
    hex.add_range('0', '9');
    hex.add_range('a', 'f');
    hex.add_range('A', 'F');
    alts.push_back(seq({literal("\\u00"), byte_range('0', '1'), bytes(hex)}));
  }
  for (auto [c, unused] : special) {
    if (all_controls && c < 0x20 && c != '\n' && c != '\t' && c != '\r') continue;
    switch (c) {
      case '"': alts.push_back(literal("\\\"")); break;
      case '\\': alts.push_back(literal("\\\\")); break;
      case '\n': alts.push_back(literal("\\n")); break;
      case '\t': alts.push_back(literal("\\t")); break;
      case '\r': alts.push_back(literal("\\r")); break;
      case '\b': alts.push_back(literal("\\b")); break;
      case '\f': alts.push_back(literal("\\f")); break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
        alts.push_back(literal(buf));
      }
    }
  }
  return alt(std::move(alts));
}

ExprPtr compile_regex(std::string_view pattern, RegexMode mode, bool json_string) {
  if (pattern.size() > size_t(kMaxRegexBytes))
    fail("the regex is ", pattern.size(), " bytes long, more than the limit of ", kMaxRegexBytes, " (kMaxRegexBytes)");
  Parser p(pattern, json_string);
  return p.parse(mode);
}

}  // namespace pypto::structured
