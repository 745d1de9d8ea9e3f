#include "structured/grammar.h"

#include "core/error.h"

namespace pypto::structured {

ExprPtr bytes(const ByteSet& set) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::Bytes;
  e->set = set;
  return e;
}

ExprPtr byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.add_range(lo, hi);
  return bytes(s);
}

ExprPtr literal(std::string_view text) {
  std::vector<ExprPtr> kids;
  kids.reserve(text.size());
  for (char c : text) kids.push_back(byte_range(uint8_t(c), uint8_t(c)));
  return seq(std::move(kids));
}

ExprPtr seq(std::vector<ExprPtr> kids) {
  if (kids.size() == 1) return kids[0];
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::Seq;
  e->kids = std::move(kids);
  return e;
}

ExprPtr alt(std::vector<ExprPtr> kids) {
  if (kids.size() == 1) return kids[0];
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::Alt;
  e->kids = std::move(kids);
  return e;
}

ExprPtr repeat(ExprPtr inner, int32_t min, int32_t max) {
  PYPTO_ASSERT(min >= 0 && (max < 0 || max >= min), "repeat ", min, "..", max);
  if (min == 1 && max == 1) return inner;
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::Repeat;
  e->kids = {std::move(inner)};
  e->min = min;
  e->max = max;
  return e;
}

ExprPtr optional(ExprPtr e) { return repeat(std::move(e), 0, 1); }

ExprPtr ref(int32_t rule) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::Ref;
  e->rule = rule;
  return e;
}

ExprPtr automaton(std::shared_ptr<const ByteAutomaton> a) {
  PYPTO_ASSERT(a && a->start >= 0 && a->start < a->num_states, "automaton without a start state");
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::Automaton;
  e->automaton = std::move(a);
  return e;
}

ExprPtr list(ExprPtr item, ExprPtr sep, bool min_one) {
  auto e = std::make_shared<Expr>();
  e->kind = Expr::Kind::List;
  e->kids = {std::move(item), std::move(sep)};
  e->min = min_one ? 1 : 0;
  return e;
}

void Grammar::add_text(size_t n, std::string_view what) {
  text_bytes += int64_t(n);
  if (text_bytes > kMaxGrammarTextBytes)
    fail(what, ": the grammar's literal text and patterns come to ", text_bytes, " bytes, more than the limit of ",
         kMaxGrammarTextBytes, " (kMaxGrammarTextBytes)");
}

ExprPtr empty_string() { return seq({}); }
ExprPtr nothing() { return alt({}); }

namespace {

int utf8_len(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, uint8_t* out) {
  switch (utf8_len(cp)) {
    case 1: out[0] = uint8_t(cp); break;
    case 2: out[0] = uint8_t(0xC0 | (cp >> 6)); out[1] = uint8_t(0x80 | (cp & 0x3F)); break;
    case 3:
      out[0] = uint8_t(0xE0 | (cp >> 12));
      out[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
      out[2] = uint8_t(0x80 | (cp & 0x3F));
      break;
    default:
      out[0] = uint8_t(0xF0 | (cp >> 18));
      out[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
      out[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
      out[3] = uint8_t(0x80 | (cp & 0x3F));
  }
}

// Appends the byte-range sequences for [lo, hi] (same encoded length) to `out`. A range is split
// until, at every byte position, all values between the bounds' bytes are wanted (the usual
// UTF-8 range decomposition).
void split_same_length(uint32_t lo, uint32_t hi, std::vector<ExprPtr>& out) {
  const int n = utf8_len(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split_same_length(lo, lo | m, out);
        split_same_length((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split_same_length(lo, (hi & ~m) - 1, out);
        split_same_length(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  std::vector<ExprPtr> kids;
  for (int i = 0; i < n; ++i) kids.push_back(byte_range(a[i], b[i]));
  out.push_back(seq(std::move(kids)));
}

void split_range(uint32_t lo, uint32_t hi, std::vector<ExprPtr>& out) {
  // Surrogates are not scalar values: cut them out.
  if (lo <= 0xDFFF && hi >= 0xD800) {
    if (lo < 0xD800) split_range(lo, 0xD7FF, out);
    if (hi > 0xDFFF) split_range(0xE000, hi, out);
    return;
  }
  static const uint32_t kMax[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (uint32_t top : kMax) {
    if (lo <= top && hi > top) {
      split_range(lo, top, out);
      split_range(top + 1, hi, out);
      return;
    }
  }
  split_same_length(lo, hi, out);
}

}  // namespace

ExprPtr code_points(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  std::vector<ExprPtr> out;
  ByteSet ascii;
  for (auto [lo, hi] : ranges) {
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    if (lo > hi) continue;
    // Single bytes are merged into one set, which keeps classes like [a-zA-Z0-9_] one node.
    if (lo < 0x80) {
      ascii.add_range(uint8_t(lo), uint8_t(std::min<uint32_t>(hi, 0x7F)));
      if (hi < 0x80) continue;
      lo = 0x80;
    }
    split_range(lo, hi, out);
  }
  if (!ascii.empty()) out.insert(out.begin(), bytes(ascii));
  return alt(std::move(out));
}

ExprPtr any_char() { return code_points({{0, 0x10FFFF}}); }

}  // namespace pypto::structured
