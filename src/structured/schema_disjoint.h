#pragma once
// Whether two JSON schemas (of the supported subset) provably admit no common value: what makes
// `oneOf` exact. The grammar writes a value valid under one branch; "exactly one" then needs the
// value to be invalid under every other branch, and a value-level question cannot be answered
// from the branches' grammars (a grammar writes only some of the valid texts: one key order,
// bounded whitespace). So the branches are compared as schemas, by rules that are sound:
//   - the JSON types they allow do not meet (integer counts as a number);
//   - both are const/enum lists without a common value, or one is and none of its values has a
//     type the other allows;
//   - both are numbers (or integers) whose ranges do not meet;
//   - both are strings whose length ranges do not meet;
//   - both are objects sharing a required property whose two schemas are disjoint (a
//     discriminator: {"kind": {"const": "circle"}} vs {"kind": {"const": "square"}}), or one
//     requires a property the other forbids (additionalProperties false, not in properties);
//   - a branch is an anyOf / oneOf whose every branch is disjoint from the other schema.
// Anything else counts as overlapping. Local $ref and one-entry allOf are followed.
#include <cstdint>

#include <nlohmann/json.hpp>
#include "structured/fuzz_limits.h"

namespace pypto::structured {

// Work on one oneOf: every schema compared and every pair of const/enum values looked at is one
// step out of `budget`, shared by all pairs of its branches (nested unions make the comparison
// grow with the product of their sizes). Once the budget is spent the answer is false and
// budget <= 0, which the caller reports as this limit.
inline constexpr int64_t kMaxDisjointSteps = 1'000'000 / kFuzzWorkDivisor;

bool provably_disjoint(const nlohmann::json& a, const nlohmann::json& b, const nlohmann::json& root,
                       int64_t& budget);

}  // namespace pypto::structured
