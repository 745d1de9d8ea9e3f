#pragma once
// Typed field access for JSON files (config.json, generation_config.json): every error names the
// field and the file, e.g. "config.json: field 'hidden_size' must be an integer, got string".
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace pypto {

class JsonFields {
 public:
  JsonFields(const nlohmann::json& obj, std::string path) : obj_(obj), path_(std::move(path)) {}

  int64_t req_int(const char* key) const;
  double req_number(const char* key) const;
  std::string req_string(const char* key) const;
  std::optional<int64_t> opt_int(const char* key) const;
  std::optional<double> opt_number(const char* key) const;
  std::optional<bool> opt_bool(const char* key) const;
  std::optional<std::string> opt_string(const char* key) const;
  bool has(const char* key) const { return obj_.contains(key) && !obj_.at(key).is_null(); }
  const nlohmann::json& at(const char* key) const { return obj_.at(key); }
  [[noreturn]] void bad(const char* key, const char* expected) const;
  const std::string& path() const { return path_; }

 private:
  const nlohmann::json& obj_;
  std::string path_;
};

// Parses JSON text; throws Error "<path>: invalid JSON: ..." on failure, or when not an object.
nlohmann::json parse_json_object(const std::string& text, const std::string& path);
std::string read_text_file(const std::string& path);  // Error names the path and errno text
const char* json_type_name(const nlohmann::json& v);

}  // namespace pypto
