#include "tokenizer/jinja_text.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace pypto::jinja {

char32_t next_code_point(std::string_view s, size_t& i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int len = 0;
  char32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2;
    cp = b0 & 0x1F;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3;
    cp = b0 & 0x0F;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4;
    cp = b0 & 0x07;
  } else {
    ++i;
    return 0xFFFD;
  }
  if (i + len > s.size()) {
    ++i;
    return 0xFFFD;
  }
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  i += len;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::vector<char32_t> to_code_points(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(next_code_point(s, i));
  return out;
}

std::string from_code_points(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) append_utf8(out, cp);
  return out;
}

std::u16string to_utf16(std::string_view s) {
  std::u16string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    char32_t cp = next_code_point(s, i);
    if (cp >= 0x10000) {
      cp -= 0x10000;
      out += static_cast<char16_t>(0xD800 + (cp >> 10));
      out += static_cast<char16_t>(0xDC00 + (cp & 0x3FF));
    } else {
      out += static_cast<char16_t>(cp);
    }
  }
  return out;
}

std::string from_utf16(std::u16string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    char32_t c = s[i];
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < s.size() && s[i + 1] >= 0xDC00 && s[i + 1] <= 0xDFFF) {
      c = 0x10000 + ((c - 0xD800) << 10) + (s[i + 1] - 0xDC00);
      ++i;
    }
    append_utf8(out, c);
  }
  return out;
}

static bool surrogate_at(const std::string& s, size_t i, bool high) {
  if (i + 2 >= s.size() || static_cast<unsigned char>(s[i]) != 0xED) return false;
  const auto b1 = static_cast<unsigned char>(s[i + 1]);
  return high ? (b1 >= 0xA0 && b1 <= 0xAF) : (b1 >= 0xB0 && b1 <= 0xBF);
}

std::string canonical_wtf8(std::string s) {
  if (s.find('\xED') == std::string::npos) return s;
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (surrogate_at(s, i, true) && surrogate_at(s, i + 3, false)) {
      size_t j = i;
      const char32_t hi = next_code_point(s, j);
      const char32_t lo = next_code_point(s, j);
      append_utf8(out, 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00));
      i = j;
      continue;
    }
    out += s[i++];
  }
  return out;
}

std::string to_output_utf8(std::string s) {
  if (s.find('\xED') == std::string::npos) return s;
  s = canonical_wtf8(std::move(s));
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    if (surrogate_at(s, i, true) || surrogate_at(s, i, false)) {
      out += "\xEF\xBF\xBD";
      i += 3;
      continue;
    }
    out += s[i++];
  }
  return out;
}

size_t utf16_length(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size();) n += next_code_point(s, i) >= 0x10000 ? 2 : 1;
  return n;
}

bool is_js_space(char32_t c) {
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

static size_t first_non_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!is_js_space(next_code_point(s, j))) break;
    i = j;
  }
  return i;
}

static size_t end_of_non_space(std::string_view s) {
  size_t end = 0;  // byte just after the last non-space code point
  for (size_t i = 0; i < s.size();) {
    if (!is_js_space(next_code_point(s, i))) end = i;
  }
  return end;
}

std::string js_trim_start(std::string_view s) { return std::string(s.substr(first_non_space(s))); }
std::string js_trim_end(std::string_view s) { return std::string(s.substr(0, end_of_non_space(s))); }
std::string js_trim(std::string_view s) {
  size_t b = first_non_space(s);
  if (b == s.size()) return {};
  return std::string(s.substr(b, end_of_non_space(s) - b));
}

namespace {

// JS case mapping = utf8proc's simple mapping, except for the code points listed in the
// generated table: full (SpecialCasing) mappings such as ß -> SS, and characters whose case
// node's Unicode version knows but utf8proc's does not.
struct CaseOverride {
  char32_t cp;
  char32_t to[3];
};
#include "tokenizer/jinja_case_table.inc"

template <size_t N>
const CaseOverride* find_override(const CaseOverride (&table)[N], char32_t c) {
  size_t lo = 0, hi = N;
  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (table[mid].cp < c)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo < N && table[lo].cp == c ? &table[lo] : nullptr;
}

bool is_cased(char32_t c) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

bool is_case_ignorable(char32_t c) {
  switch (c) {
    case '\'': case '.': case ':': case 0xB7: case 0x387: case 0x5F4: case 0x2018: case 0x2019:
    case 0x2024: case 0x2027: case 0xFE13: case 0xFE52: case 0xFE55: case 0xFF07: case 0xFF0E: case 0xFF1A:
      return true;
    default: break;
  }
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_ME || cat == UTF8PROC_CATEGORY_CF ||
         cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_SK;
}

// Unicode's Final_Sigma condition for the Σ at cps[i]: a cased letter before it and none after
// it (skipping case-ignorable characters on both sides).
bool final_sigma(const std::vector<char32_t>& cps, size_t i) {
  bool before = false;
  for (size_t j = i; j-- > 0;) {
    if (is_case_ignorable(cps[j])) continue;
    before = is_cased(cps[j]);
    break;
  }
  if (!before) return false;
  for (size_t j = i + 1; j < cps.size(); ++j) {
    if (is_case_ignorable(cps[j])) continue;
    return !is_cased(cps[j]);
  }
  return true;
}

template <size_t N>
std::string map_case(std::string_view s, const CaseOverride (&table)[N], bool upper) {
  std::string out;
  out.reserve(s.size());
  if (!upper && s.find("\xCE\xA3") != std::string_view::npos) {  // contains Σ: context matters
    const std::vector<char32_t> cps = to_code_points(s);
    for (size_t k = 0; k < cps.size(); ++k) {
      if (cps[k] == 0x3A3) {
        append_utf8(out, final_sigma(cps, k) ? 0x3C2 : 0x3C3);
        continue;
      }
      std::string one;
      append_utf8(one, cps[k]);
      out += map_case(one, table, upper);
    }
    return out;
  }
  for (size_t i = 0; i < s.size();) {
    const char32_t c = next_code_point(s, i);
    if (const CaseOverride* o = find_override(table, c)) {
      for (char32_t t : o->to)
        if (t) append_utf8(out, t);
      continue;
    }
    const auto cp = static_cast<utf8proc_int32_t>(c);
    append_utf8(out, static_cast<char32_t>(upper ? utf8proc_toupper(cp) : utf8proc_tolower(cp)));
  }
  return out;
}

}  // namespace

std::string js_upper(std::string_view s) { return map_case(s, kUpperOverrides, true); }
std::string js_lower(std::string_view s) { return map_case(s, kLowerOverrides, false); }

std::string js_number_to_string(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return "0";  // also -0
  std::string sign;
  if (v < 0) {
    sign = "-";
    v = -v;
  }
  // Shortest round-trip digits in scientific form: d[.ddd]e[+-]x.
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t epos = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (sci[i] != '.') digits += sci[i];
  int exp10 = std::atoi(sci.c_str() + epos + 1);
  const int k = static_cast<int>(digits.size());
  const int n = exp10 + 1;  // position of the decimal point relative to the digits
  std::string out;
  if (k <= n && n <= 21) {
    out = digits + std::string(n - k, '0');
  } else if (0 < n && n <= 21) {
    out = digits.substr(0, n) + "." + digits.substr(n);
  } else if (-6 < n && n <= 0) {
    out = "0." + std::string(-n, '0') + digits;
  } else {
    const int e = n - 1;
    std::string es = (e >= 0 ? "+" : "-") + std::to_string(e >= 0 ? e : -e);
    out = k == 1 ? digits + "e" + es : digits.substr(0, 1) + "." + digits.substr(1) + "e" + es;
  }
  return sign + out;
}

void append_json_string(std::string& out, std::string_view s) {
  static const char* hex = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    const auto c = static_cast<unsigned char>(ch);
    if (c == 0xED && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0xA0) {
      // A lone surrogate (WTF-8): JSON.stringify writes it as \udxxx.
      size_t j = i;
      const char32_t u = next_code_point(s, j);
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += hex[(u >> shift) & 15];
      i = j - 1;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

std::string make_ascii_safe(std::string_view s) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(s.size());
  for (char16_t u : to_utf16(s)) {
    if (u < 0x7F) {
      out += static_cast<char>(u);
    } else {
      out += "\\u";
      for (int shift = 12; shift >= 0; shift -= 4) out += hex[(u >> shift) & 15];
    }
  }
  return out;
}

// Length of the longest StrDecimalLiteral prefix of s ("Infinity", digits, fraction, exponent),
// without a sign. 0 when there is none.
static size_t decimal_prefix(std::string_view s) {
  if (s.substr(0, 8) == "Infinity") return 8;
  size_t i = 0, int_digits = 0, frac_digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++int_digits;
  if (i < s.size() && s[i] == '.') {
    size_t j = i + 1;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j, ++frac_digits;
    if (int_digits + frac_digits > 0) i = j;
  }
  if (int_digits + frac_digits == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    size_t d = j;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    if (j > d) i = j;
  }
  return i;
}

static double parse_decimal(std::string_view s) {
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  double v;
  if (s.substr(0, 8) == "Infinity") {
    v = std::numeric_limits<double>::infinity();
  } else {
    std::string tmp(s);
    v = std::strtod(tmp.c_str(), nullptr);
  }
  return neg ? -v : v;
}

double js_parse_float(std::string_view s) {
  s = s.substr(first_non_space(s));
  size_t sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  size_t len = decimal_prefix(s.substr(sign));
  if (len == 0) return std::numeric_limits<double>::quiet_NaN();
  return parse_decimal(s.substr(0, sign + len));
}

double js_parse_int(std::string_view s) {
  s = s.substr(first_non_space(s));
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.remove_prefix(1);
  }
  size_t i = 0;
  double v = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') v = v * 10 + (s[i++] - '0');
  if (i == 0) return std::numeric_limits<double>::quiet_NaN();
  if (i > 15) v = std::strtod(std::string(s.substr(0, i)).c_str(), nullptr);  // exact rounding
  return neg ? -v : v;
}

double js_string_to_number(std::string_view s) {
  std::string t = js_trim(s);
  std::string_view v = t;
  if (v.empty()) return 0;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (v.size() > 2 && v[0] == '0' && (v[1] == 'x' || v[1] == 'X' || v[1] == 'o' || v[1] == 'O' ||
                                      v[1] == 'b' || v[1] == 'B')) {
    int base = (v[1] == 'x' || v[1] == 'X') ? 16 : (v[1] == 'o' || v[1] == 'O') ? 8 : 2;
    double r = 0;
    for (size_t i = 2; i < v.size(); ++i) {
      int d = std::isdigit(static_cast<unsigned char>(v[i])) ? v[i] - '0'
              : (v[i] >= 'a' && v[i] <= 'f')                 ? v[i] - 'a' + 10
              : (v[i] >= 'A' && v[i] <= 'F')                 ? v[i] - 'A' + 10
                                                             : 99;
      if (d >= base) return nan;
      r = r * base + d;
    }
    return r;
  }
  size_t sign = (v[0] == '+' || v[0] == '-') ? 1 : 0;
  size_t len = decimal_prefix(v.substr(sign));
  if (len == 0 || sign + len != v.size()) return nan;
  return parse_decimal(v);
}

}  // namespace pypto::jinja
