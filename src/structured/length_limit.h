#pragma once
// A JSON string body (the bytes between the quotes, escapes as written) from a regex or a format
// whose decoded length must also lie in [min_len, max_len] (JSON Schema's minLength / maxLength
// with pattern or format): the body's automaton is determinized and run in product with a
// character counter. A character starts at a byte that is neither a UTF-8 continuation byte
// (0x80-0xBF) nor inside an escape (the letter after '\', the 4 hex digits of \uXXXX), so an
// escape counts once and a code point of any width counts once, as validators count them.
#include "structured/grammar.h"
#include "structured/fuzz_limits.h"

namespace pypto::structured {

// max_len < 0: no upper bound. Throws Error when the product grows past kMaxStates.
ExprPtr limit_length(const ExprPtr& body, int min_len, int max_len);

inline constexpr int kMaxLengthProductStates = int(200'000 / kFuzzWorkDivisor);

}  // namespace pypto::structured
