#pragma once
// Numbers in a range as grammar expressions over their JSON text: integers between two int64
// bounds, and decimals (no exponent) between two exact decimal bounds, either side inclusive or
// exclusive, compared digit by digit so that no floating-point rounding enters the grammar.
#include <cstdint>
#include <optional>
#include <string>

#include "structured/grammar.h"

namespace pypto::structured {

// Decimal strings (no sign, no leading zeros) of every integer in [lo, hi], both >= 0;
// hi < 0 means no upper bound.
ExprPtr nonneg_range(int64_t lo, int64_t hi);

// An exact decimal bound: sign, integer part, fraction digits (no trailing zeros).
struct Decimal {
  bool neg = false;
  int64_t ip = 0;
  std::string frac;
  bool is_zero() const { return ip == 0 && frac.empty(); }
};
// The decimal a JSON number bound stands for: an integer as is, a double as its shortest
// round-trip text (0.1 is 0.1, the value a JSON validator parses it to). Magnitudes must be
// below 9e18 (the caller checks).
Decimal decimal_of(double v);
int compare(const Decimal& a, const Decimal& b);  // -1, 0, 1
std::string to_string(const Decimal& d);

struct DecimalBound {
  Decimal value;
  bool exclusive = false;
};

// JSON numbers without exponent (-?(0|[1-9][0-9]*)(\.[0-9]+)?) whose value lies within the
// bounds (nullopt: unbounded). Fraction digits are at most 16, and at most 15 significant digits
// where the integer part equals a bound's: a number compared with a bound then parses to a
// double on the same side of the bound's double, so any validator agrees with the grammar.
// "-0" alone is not written. Empty (nothing()) when no such number exists.
ExprPtr decimal_range(const std::optional<DecimalBound>& lo, const std::optional<DecimalBound>& hi);

}  // namespace pypto::structured
