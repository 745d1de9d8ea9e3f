#include "structured/number_range.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace pypto::structured {

namespace {

ExprPtr digits(int min, int max) { return repeat(byte_range('0', '9'), min, max); }
std::string str(int64_t v) { return std::to_string(v); }

// x and y have the same number of digits, x <= y: strings of that length in [x, y].
ExprPtr same_length(const std::string& x, const std::string& y) {
  const size_t n = x.size();
  if (n == 0) return empty_string();
  if (x[0] == y[0]) return seq({literal(x.substr(0, 1)), same_length(x.substr(1), y.substr(1))});
  const bool x_rest_zero = x.find_first_not_of('0', 1) == std::string::npos;
  const bool y_rest_nine = y.find_first_not_of('9', 1) == std::string::npos;
  std::vector<ExprPtr> alts;
  char lo_first = x[0], hi_first = y[0];
  if (!x_rest_zero) {
    alts.push_back(seq({literal(x.substr(0, 1)), same_length(x.substr(1), std::string(n - 1, '9'))}));
    ++lo_first;
  }
  if (!y_rest_nine) {
    alts.push_back(seq({literal(y.substr(0, 1)), same_length(std::string(n - 1, '0'), y.substr(1))}));
    --hi_first;
  }
  if (lo_first <= hi_first)
    alts.push_back(seq({byte_range(uint8_t(lo_first), uint8_t(hi_first)), digits(int(n - 1), int(n - 1))}));
  return alt(std::move(alts));
}

constexpr int kMaxFraction = 16;

// Fraction digits f (value 0.f) between two digit strings, as a walk that stays "tight" against
// a bound while its digits equal the bound's (a bound shorter than the walk reads as zeros).
struct FractionRange {
  const std::string* lo;  // null: no lower bound on the fraction
  bool lo_excl;
  const std::string* hi;
  bool hi_excl;
  int max_digits;

  // Whether the fraction may end after i digits while tight against the bounds flagged.
  bool end_ok(size_t i, bool tl, bool th) const {
    // Tight against lo: equal to lo's first i digits, less than lo while lo has more (it has no
    // trailing zeros), equal once lo is used up.
    if (tl && (i < lo->size() || lo_excl)) return false;
    if (th && i >= hi->size() && hi_excl) return false;
    return true;
  }

  // The digits from position i on (at least one when i == 0).
  ExprPtr tail(size_t i, bool tl, bool th) const {
    if (!tl && !th) return digits(i == 0 ? 1 : 0, max_digits - int(i));
    std::vector<ExprPtr> alts;
    if (i > 0 && end_ok(i, tl, th)) alts.push_back(empty_string());
    if (int(i) < max_digits) {
      const char l = tl && i < lo->size() ? (*lo)[i] : '0';
      const char h = th ? (i < hi->size() ? (*hi)[i] : '0') : '9';
      ByteSet sets[2][2];
      for (char d = l; d <= h; ++d) sets[tl && d == l][th && d == h].add(uint8_t(d));
      for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b)
          if (!sets[a][b].empty()) alts.push_back(seq({bytes(sets[a][b]), tail(i + 1, a, b)}));
    }
    return alt(std::move(alts));
  }

  // Nothing, or "." and the digits.
  ExprPtr optional_fraction() const {
    const bool tl = lo != nullptr, th = hi != nullptr;
    return alt({end_ok(0, tl, th) ? empty_string() : nothing(), seq({literal("."), tail(0, tl, th)})});
  }
};

int significant(int64_t ip) { return ip == 0 ? 0 : int(str(ip).size()); }

// Non-negative decimals in [lo, hi] (bounds >= 0, each maybe exclusive).
ExprPtr nonneg_decimals(const Decimal& lo, bool lo_excl, const Decimal* hi, bool hi_excl) {
  if (hi && compare(lo, *hi) > 0) return nothing();
  std::vector<ExprPtr> alts;
  const auto at_bound = [](int64_t ip) { return std::max(1, 15 - significant(ip)); };
  if (hi && hi->ip == lo.ip) {
    FractionRange f{&lo.frac, lo_excl, &hi->frac, hi_excl, at_bound(lo.ip)};
    alts.push_back(seq({literal(str(lo.ip)), f.optional_fraction()}));
  } else {
    FractionRange from{&lo.frac, lo_excl, nullptr, false, at_bound(lo.ip)};
    alts.push_back(seq({literal(str(lo.ip)), from.optional_fraction()}));
    const int64_t mid_lo = lo.ip + 1, mid_hi = hi ? hi->ip - 1 : -1;
    if (!hi || mid_lo <= mid_hi)
      alts.push_back(seq({nonneg_range(mid_lo, mid_hi), optional(seq({literal("."), digits(1, kMaxFraction)}))}));
    if (hi) {
      FractionRange to{nullptr, false, &hi->frac, hi_excl, at_bound(hi->ip)};
      alts.push_back(seq({literal(str(hi->ip)), to.optional_fraction()}));
    }
  }
  return alt(std::move(alts));
}

}  // namespace

ExprPtr nonneg_range(int64_t lo, int64_t hi) {
  std::vector<ExprPtr> alts;
  const int lo_len = int(str(lo).size());
  const int hi_len = hi < 0 ? 19 : int(str(hi).size());
  for (int len = lo_len; len <= hi_len; ++len) {
    int64_t a = len == 1 ? 0 : 1;
    for (int k = 1; k < len; ++k) a *= 10;  // 10^(len-1)
    const int64_t b = len >= 19 ? std::numeric_limits<int64_t>::max() : a == 0 ? 9 : a * 10 - 1;
    const int64_t from = std::max(lo, a), to = hi < 0 ? b : std::min(hi, b);
    if (from > to) continue;
    alts.push_back(same_length(str(from), str(to)));
  }
  if (hi < 0) alts.push_back(seq({byte_range('1', '9'), digits(19, -1)}));  // beyond int64
  return alt(std::move(alts));
}

Decimal decimal_of(double v) {
  // nlohmann writes a double as its shortest round-trip text: "0.1", "1e-07", "-2.5e+20".
  const std::string t = nlohmann::json(v).dump();
  Decimal d;
  size_t i = 0;
  if (t[i] == '-') d.neg = true, ++i;
  std::string mant;
  int point = -1;
  for (; i < t.size() && t[i] != 'e' && t[i] != 'E'; ++i) {
    if (t[i] == '.') point = int(mant.size());
    else mant += t[i];
  }
  if (point < 0) point = int(mant.size());
  if (i < t.size()) point += std::atoi(t.c_str() + i + 1);
  std::string ip = point <= 0 ? "0" : mant.substr(0, std::min<size_t>(size_t(point), mant.size()));
  if (point > int(mant.size())) ip += std::string(size_t(point) - mant.size(), '0');
  d.frac = point < 0 ? std::string(size_t(-point), '0') + mant : point < int(mant.size()) ? mant.substr(size_t(point)) : "";
  while (!d.frac.empty() && d.frac.back() == '0') d.frac.pop_back();
  PYPTO_ASSERT(ip.size() <= 19, "decimal bound out of range: ", t);
  d.ip = std::stoll(ip);
  if (d.is_zero()) d.neg = false;
  return d;
}

int compare(const Decimal& a, const Decimal& b) {
  if (a.neg != b.neg) return a.neg ? -1 : 1;
  int c = a.ip < b.ip ? -1 : a.ip > b.ip ? 1 : 0;
  if (c == 0) {
    const size_t n = std::max(a.frac.size(), b.frac.size());
    const std::string x = a.frac + std::string(n - a.frac.size(), '0'), y = b.frac + std::string(n - b.frac.size(), '0');
    c = x < y ? -1 : x > y ? 1 : 0;
  }
  return a.neg ? -c : c;
}

std::string to_string(const Decimal& d) {
  std::string out = d.neg ? "-" : "";
  out += str(d.ip);
  if (!d.frac.empty()) out.append(".").append(d.frac);
  return out;
}

ExprPtr decimal_range(const std::optional<DecimalBound>& lo, const std::optional<DecimalBound>& hi) {
  const Decimal zero;
  std::vector<ExprPtr> alts;
  // Values >= 0: from max(lo, 0) up to hi.
  const bool nonneg_part = !hi || (!hi->value.neg && !(hi->value.is_zero() && hi->exclusive));
  if (nonneg_part) {
    const bool lo_pos = lo && !lo->value.neg;
    const Decimal* h = hi ? &hi->value : nullptr;
    alts.push_back(nonneg_decimals(lo_pos ? lo->value : zero, lo_pos && lo->exclusive, h, hi && hi->exclusive));
  }
  // Values < 0 as "-" and a magnitude in (max(-hi, 0), -lo]: a zero magnitude ("-0", "-0.0")
  // is left out.
  if (!lo || lo->value.neg) {
    Decimal mlo = zero, mhi;
    bool mlo_excl = true;
    if (hi && hi->value.neg) {
      mlo = hi->value;
      mlo.neg = false;
      mlo_excl = hi->exclusive;
    }
    if (lo) {
      mhi = lo->value;
      mhi.neg = false;
    }
    alts.push_back(seq({literal("-"), nonneg_decimals(mlo, mlo_excl, lo ? &mhi : nullptr, lo && lo->exclusive)}));
  }
  return alt(std::move(alts));
}

}  // namespace pypto::structured
