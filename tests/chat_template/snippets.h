#pragma once
// One-feature templates for the parity test (filters, tests, methods, slicing, loops, macros,
// whitespace control, tojson, operators, error paths) and the contexts they are rendered with.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace pypto::test {

std::vector<std::pair<std::string, std::string>> feature_snippets();  // (name, template)
std::vector<nlohmann::ordered_json> feature_contexts();

}  // namespace pypto::test
