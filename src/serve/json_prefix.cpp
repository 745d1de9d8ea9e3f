#include "serve/json_prefix.h"

namespace pypto {

namespace {
bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
}  // namespace

JsonPrefix JsonPrefix::inside_object() {
  JsonPrefix p;
  p.stack_.push_back('{');
  p.s_ = S::KeyOrEnd;
  return p;
}

JsonPrefix::Step JsonPrefix::close() {
  stack_.pop_back();
  s_ = stack_.empty() ? S::Done : S::AfterValue;
  return stack_.empty() ? Step::Done : Step::Ok;
}

// A byte that cannot extend the number: the number ends if it is complete, and the byte is
// read after it.
JsonPrefix::Step JsonPrefix::end_number(char c) {
  if (s_ != S::NumZero && s_ != S::NumInt && s_ != S::NumFrac && s_ != S::NumExp) return Step::Bad;
  const S before = s_;
  s_ = S::AfterValue;
  if (stack_.empty()) s_ = S::Done;  // a top-level number ends at its first non-number byte
  const Step st = s_ == S::Done ? Step::Bad : feed(c);
  if (st == Step::Bad) s_ = before;
  return st;
}

JsonPrefix::Step JsonPrefix::feed(char c) {
  switch (s_) {
    case S::Str:
      if (c == '"') {
        s_ = key_ ? S::Colon : S::AfterValue;
        if (!key_ && stack_.empty()) s_ = S::Done;
        return s_ == S::Done ? Step::Done : Step::Ok;
      }
      if (c == '\\') s_ = S::StrEsc;
      return uint8_t(c) < 0x20 ? Step::Bad : Step::Ok;
    case S::StrEsc:
      if (c == 'u') {
        s_ = S::StrHex;
        hex_ = 0;
        return Step::Ok;
      }
      if (std::string_view("\"\\/bfnrt").find(c) == std::string_view::npos) return Step::Bad;
      s_ = S::Str;
      return Step::Ok;
    case S::StrHex:
      if (!is_hex(c)) return Step::Bad;
      if (++hex_ == 4) s_ = S::Str;
      return Step::Ok;
    case S::Lit:
      if (c != lit_rest_.front()) return Step::Bad;
      lit_rest_.remove_prefix(1);
      if (lit_rest_.empty()) s_ = stack_.empty() ? S::Done : S::AfterValue;
      return s_ == S::Done ? Step::Done : Step::Ok;
    case S::NumSign:
      if (c == '0') s_ = S::NumZero;
      else if (is_digit(c)) s_ = S::NumInt;
      else return Step::Bad;
      return Step::Ok;
    case S::NumZero:
    case S::NumInt:
      if (is_digit(c) && s_ == S::NumInt) return Step::Ok;
      if (c == '.') s_ = S::NumDot;
      else if (c == 'e' || c == 'E') s_ = S::NumE;
      else return end_number(c);
      return Step::Ok;
    case S::NumDot:
      if (!is_digit(c)) return Step::Bad;
      s_ = S::NumFrac;
      return Step::Ok;
    case S::NumFrac:
      if (is_digit(c)) return Step::Ok;
      if (c != 'e' && c != 'E') return end_number(c);
      s_ = S::NumE;
      return Step::Ok;
    case S::NumE:
      if (c == '+' || c == '-') s_ = S::NumESign;
      else if (is_digit(c)) s_ = S::NumExp;
      else return Step::Bad;
      return Step::Ok;
    case S::NumESign:
      if (!is_digit(c)) return Step::Bad;
      s_ = S::NumExp;
      return Step::Ok;
    case S::NumExp:
      return is_digit(c) ? Step::Ok : end_number(c);
    case S::Done:
      return Step::Bad;
    default:
      break;
  }
  // Between tokens.
  if (is_ws(c)) return Step::Space;
  switch (s_) {
    case S::ValueOrEnd:
      if (c == ']') return close();
      [[fallthrough]];
    case S::Value:
      switch (c) {
        case '{': stack_.push_back('{'); s_ = S::KeyOrEnd; return Step::Ok;
        case '[': stack_.push_back('['); s_ = S::ValueOrEnd; return Step::Ok;
        case '"': s_ = S::Str; key_ = false; return Step::Ok;
        case 't': s_ = S::Lit; lit_rest_ = "rue"; return Step::Ok;
        case 'f': s_ = S::Lit; lit_rest_ = "alse"; return Step::Ok;
        case 'n': s_ = S::Lit; lit_rest_ = "ull"; return Step::Ok;
        case '-': s_ = S::NumSign; return Step::Ok;
        case '0': s_ = S::NumZero; return Step::Ok;
        default:
          if (!is_digit(c)) return Step::Bad;
          s_ = S::NumInt;
          return Step::Ok;
      }
    case S::KeyOrEnd:
      if (c == '}') return close();
      [[fallthrough]];
    case S::Key:
      if (c != '"') return Step::Bad;
      s_ = S::Str;
      key_ = true;
      return Step::Ok;
    case S::Colon:
      if (c != ':') return Step::Bad;
      s_ = S::Value;
      return Step::Ok;
    case S::AfterValue:
      if (c == ',') {
        s_ = stack_.back() == '{' ? S::Key : S::Value;
        return Step::Ok;
      }
      if (c == (stack_.back() == '{' ? '}' : ']')) return close();
      return Step::Bad;
    default:
      return Step::Bad;
  }
}

}  // namespace pypto
