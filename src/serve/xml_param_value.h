#pragma once
// The JSON value of one XML tool-call parameter (serve/xml_tool_parser.h), typed by the
// parameter's JSON schema, since the XML form writes every value as bare text:
//   - not in the tool's "properties": the text, as a string;
//   - "type" string (alone): the text, as a string;
//   - "type" integer / number / boolean / object / array / null, or a list of them: the text
//     read as JSON when it is a value of one of those types ("null" only where null is allowed);
//     a list that also allows string takes the text as a string otherwise;
//   - no "type" (enum, anyOf, ...): the text read as JSON when it is JSON, else the string.
// Text that fits none of the schema's types stays a string: the model broke the schema, and the
// client sees what it wrote rather than a guess (a grammar-constrained tool_choice cannot).
#include <string_view>

#include <nlohmann/json.hpp>

namespace pypto {

// schema: the parameter's schema (null when the tool does not declare it).
nlohmann::ordered_json xml_param_value(std::string_view text, const nlohmann::json& schema);

}  // namespace pypto
