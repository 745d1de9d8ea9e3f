#include "structured/ebnf.h"

#include <map>

#include "core/error.h"
#include "structured/regex.h"

namespace pypto::structured {

namespace {

bool is_name_char(char c) { return std::isalnum(uint8_t(c)) || c == '_' || c == '-'; }

class EbnfParser {
 public:
  explicit EbnfParser(std::string_view t) : t_(t) {}

  Grammar parse() {
    skip();
    while (i_ < t_.size()) {
      const std::string name = name_token();
      skip();
      if (t_.substr(i_, 3) != "::=") error("expected '::=' after rule name '" + name + "'");
      i_ += 3;
      const int32_t r = rule_id(name);
      if (g_.rules[size_t(r)].body) error("rule '" + name + "' is defined twice");
      g_.rules[size_t(r)].body = alternatives();
      skip();
    }
    auto root = ids_.find("root");
    if (root == ids_.end()) fail("grammar: no rule named 'root'");
    for (const Grammar::Rule& r : g_.rules)
      if (!r.body) fail("grammar: rule '", r.name, "' is used but never defined");
    g_.root = ref(root->second);
    return std::move(g_);
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    int line = 1;
    for (size_t k = 0; k < i_ && k < t_.size(); ++k) line += t_[k] == '\n';
    fail("grammar line ", line, ": ", what);
  }

  void skip() {
    while (i_ < t_.size()) {
      if (std::isspace(uint8_t(t_[i_]))) ++i_;
      else if (t_[i_] == '#') while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      else break;
    }
  }

  std::string name_token() {
    const size_t s = i_;
    while (i_ < t_.size() && is_name_char(t_[i_])) ++i_;
    if (s == i_) error(std::string("expected a rule name, got '") + (i_ < t_.size() ? t_[i_] : ' ') + "'");
    return std::string(t_.substr(s, i_ - s));
  }

  int32_t rule_id(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    if (g_.rules.size() >= size_t(kMaxEbnfRules))
      error(str_cat("more than ", kMaxEbnfRules, " rules, the limit (kMaxEbnfRules)"));
    const int32_t id = g_.add_rule(name);
    ids_[name] = id;
    return id;
  }

  // Whether the next thing starts a new rule ("name ::=").
  bool at_rule_start() {
    size_t k = i_;
    while (k < t_.size() && is_name_char(t_[k])) ++k;
    if (k == i_) return false;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t' || t_[k] == '\n' || t_[k] == '\r')) ++k;
    return t_.substr(k, 3) == "::=";
  }

  ExprPtr alternatives() {
    std::vector<ExprPtr> alts = {sequence()};
    for (;;) {
      skip();
      if (i_ < t_.size() && t_[i_] == '|') {
        ++i_;
        alts.push_back(sequence());
      } else {
        break;
      }
    }
    return alt(std::move(alts));
  }

  ExprPtr sequence() {
    std::vector<ExprPtr> items;
    for (;;) {
      skip();
      if (i_ >= t_.size() || t_[i_] == '|' || t_[i_] == ')' || at_rule_start()) break;
      items.push_back(postfix(atom()));
    }
    return seq(std::move(items));
  }

  int number() {
    if (i_ >= t_.size() || !std::isdigit(uint8_t(t_[i_]))) error("expected a number");
    int v = 0;
    while (i_ < t_.size() && std::isdigit(uint8_t(t_[i_]))) {
      v = v * 10 + (t_[i_++] - '0');
      if (v > kMaxEbnfRepeat)
        error(str_cat("a repetition count exceeds the limit of ", kMaxEbnfRepeat, " (kMaxEbnfRepeat)"));
    }
    return v;
  }

  ExprPtr postfix(ExprPtr a) {
    if (i_ >= t_.size()) return a;
    const char c = t_[i_];
    if (c == '*') { ++i_; return repeat(a, 0, -1); }
    if (c == '+') { ++i_; return repeat(a, 1, -1); }
    if (c == '?') { ++i_; return repeat(a, 0, 1); }
    if (c == '{') {
      ++i_;
      const int lo = number();
      int hi = lo;
      if (i_ < t_.size() && t_[i_] == ',') {
        ++i_;
        hi = i_ < t_.size() && t_[i_] == '}' ? -1 : number();
      }
      if (i_ >= t_.size() || t_[i_] != '}') error("expected '}'");
      ++i_;
      if (hi >= 0 && hi < lo) error("repetition with max < min");
      return repeat(a, lo, hi);
    }
    return a;
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    for (int k = 0; k < n; ++k) {
      if (i_ >= t_.size() || !std::isxdigit(uint8_t(t_[i_]))) error("bad hex escape");
      const char c = char(std::tolower(uint8_t(t_[i_++])));
      v = v * 16 + uint32_t(std::isdigit(uint8_t(c)) ? c - '0' : c - 'a' + 10);
    }
    return v;
  }

  static void put_utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) out += char(cp);
    else if (cp < 0x800) { out += char(0xC0 | (cp >> 6)); out += char(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) { out += char(0xE0 | (cp >> 12)); out += char(0x80 | ((cp >> 6) & 0x3F)); out += char(0x80 | (cp & 0x3F)); }
    else { out += char(0xF0 | (cp >> 18)); out += char(0x80 | ((cp >> 12) & 0x3F)); out += char(0x80 | ((cp >> 6) & 0x3F)); out += char(0x80 | (cp & 0x3F)); }
  }

  ExprPtr atom() {
    const char c = t_[i_];
    if (c == '"') {
      ++i_;
      std::string lit;
      while (i_ < t_.size() && t_[i_] != '"') {
        if (t_[i_] == '\n') error("unterminated string");
        if (t_[i_] != '\\') { lit += t_[i_++]; continue; }
        ++i_;
        if (i_ >= t_.size()) error("unterminated string");
        const char e = t_[i_++];
        switch (e) {
          case 'n': lit += '\n'; break;
          case 't': lit += '\t'; break;
          case 'r': lit += '\r'; break;
          case '\\': lit += '\\'; break;
          case '"': lit += '"'; break;
          case 'x': lit += char(hex(2)); break;
          case 'u': put_utf8(hex(4), lit); break;
          default: error(std::string("unknown escape \\") + e + " in a string");
        }
      }
      if (i_ >= t_.size()) error("unterminated string");
      ++i_;
      return literal(lit);
    }
    if (c == '[') {
      const size_t s = i_;
      ++i_;
      if (i_ < t_.size() && t_[i_] == '^') ++i_;
      if (i_ < t_.size() && t_[i_] == ']') ++i_;
      while (i_ < t_.size() && t_[i_] != ']') {
        if (t_[i_] == '\\') ++i_;
        ++i_;
      }
      if (i_ >= t_.size()) error("unterminated character class");
      ++i_;
      try {
        return compile_regex(t_.substr(s, i_ - s), RegexMode::FullMatch, false);
      } catch (const Error& e) {
        error(e.what());
      }
    }
    if (c == '(') {
      ++i_;
      if (++depth_ > kMaxEbnfNesting)
        error(str_cat("groups nest deeper than the limit of ", kMaxEbnfNesting, " (kMaxEbnfNesting)"));
      ExprPtr inner = alternatives();
      --depth_;
      skip();
      if (i_ >= t_.size() || t_[i_] != ')') error("missing ')'");
      ++i_;
      return inner;
    }
    if (is_name_char(c)) return ref(rule_id(name_token()));
    error(std::string("unexpected character '") + c + "'");
  }

  std::string_view t_;
  size_t i_ = 0;
  int depth_ = 0;  // groups open
  Grammar g_;
  std::map<std::string, int32_t> ids_;
};

}  // namespace

Grammar parse_ebnf(std::string_view text) {
  if (text.size() > size_t(kMaxEbnfBytes))
    fail("grammar: the text is ", text.size(), " bytes long, more than the limit of ", kMaxEbnfBytes, " (kMaxEbnfBytes)");
  return EbnfParser(text).parse();
}

}  // namespace pypto::structured
