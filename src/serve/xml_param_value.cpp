#include "serve/xml_param_value.h"

#include <set>
#include <string>

namespace pypto {

namespace {

using ojson = nlohmann::ordered_json;

// The text as JSON, or null-json "discarded" when it is not JSON.
ojson parse_or_discarded(std::string_view text) {
  return ojson::parse(text, nullptr, /*allow_exceptions=*/false);
}

bool has_type(const ojson& v, const std::string& type) {
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer() || v.is_number_unsigned();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "null") return v.is_null();
  return false;
}

}  // namespace

ojson xml_param_value(std::string_view text, const nlohmann::json& schema) {
  const ojson as_string = ojson(std::string(text));
  if (!schema.is_object()) return as_string;
  const auto t = schema.find("type");
  if (t == schema.end()) {
    const ojson v = parse_or_discarded(text);
    return v.is_discarded() ? as_string : v;
  }
  std::set<std::string> types;
  if (t->is_string()) types.insert(t->get<std::string>());
  if (t->is_array())
    for (const auto& x : *t)
      if (x.is_string()) types.insert(x.get<std::string>());
  if (types == std::set<std::string>{"string"}) return as_string;
  const ojson v = parse_or_discarded(text);
  if (!v.is_discarded() && !v.is_string())
    for (const std::string& type : types)
      if (has_type(v, type)) return v;
  return as_string;
}

}  // namespace pypto
