#include "io/json_fields.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace pypto {

const char* json_type_name(const nlohmann::json& v) {
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  return v.type_name();
}

void JsonFields::bad(const char* key, const char* expected) const {
  if (!obj_.contains(key)) fail(path_, ": missing field '", key, "' (", expected, ")");
  fail(path_, ": field '", key, "' must be ", expected, ", got ", json_type_name(obj_.at(key)), " ",
       obj_.at(key).dump());
}

int64_t JsonFields::req_int(const char* key) const {
  auto v = opt_int(key);
  if (!v) bad(key, "an integer");
  return *v;
}
double JsonFields::req_number(const char* key) const {
  auto v = opt_number(key);
  if (!v) bad(key, "a number");
  return *v;
}
std::string JsonFields::req_string(const char* key) const {
  auto v = opt_string(key);
  if (!v) bad(key, "a string");
  return *v;
}
std::optional<int64_t> JsonFields::opt_int(const char* key) const {
  if (!has(key)) return std::nullopt;
  const auto& v = obj_.at(key);
  if (!v.is_number_integer()) bad(key, "an integer");
  return v.get<int64_t>();
}
std::optional<double> JsonFields::opt_number(const char* key) const {
  if (!has(key)) return std::nullopt;
  const auto& v = obj_.at(key);
  if (!v.is_number()) bad(key, "a number");
  return v.get<double>();
}
std::optional<bool> JsonFields::opt_bool(const char* key) const {
  if (!has(key)) return std::nullopt;
  const auto& v = obj_.at(key);
  if (!v.is_boolean()) bad(key, "a boolean");
  return v.get<bool>();
}
std::optional<std::string> JsonFields::opt_string(const char* key) const {
  if (!has(key)) return std::nullopt;
  const auto& v = obj_.at(key);
  if (!v.is_string()) bad(key, "a string");
  return v.get<std::string>();
}

nlohmann::json parse_json_object(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for huge numbers
    fail(path, ": invalid JSON: ", e.what());
  }
  if (!j.is_object()) fail(path, ": expected a JSON object at the top level, got ", json_type_name(j));
  return j;
}

std::string read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail(path, ": cannot open: ", std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace pypto
